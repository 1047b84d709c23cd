package local

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// usedResources is every built-in resource istiod (its kube registry, ambient index, gateway
// deployment controller, leader election, CRD watcher) or the framework lists, watches or writes.
var usedResources = []schema.GroupVersionResource{
	{Version: "v1", Resource: "pods"}, {Version: "v1", Resource: "services"}, {Version: "v1", Resource: "endpoints"},
	{Version: "v1", Resource: "namespaces"}, {Version: "v1", Resource: "nodes"}, {Version: "v1", Resource: "secrets"},
	{Version: "v1", Resource: "configmaps"}, {Version: "v1", Resource: "serviceaccounts"}, {Version: "v1", Resource: "events"},
	{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"},
	{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"},
	{Group: "networking.k8s.io", Version: "v1", Resource: "ingressclasses"},
	{Group: "apps", Version: "v1", Resource: "deployments"},
	{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"},
	{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
	{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
	{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
}

// TestSlimAPIServerServesWhatIstiodUses: the API groups turned off are gone, and every resource
// and review API that istiod and the framework use still answers.
func TestSlimAPIServerServesWhatIstiodUses(t *testing.T) {
	p := cachedProvider(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startClusters(t, ctx, p, 1)[0]

	groups, err := c.Client.Discovery().ServerGroups()
	require.NoError(t, err)
	served := map[string]bool{}
	for _, g := range groups.Groups {
		served[g.Name] = true
	}
	for _, off := range disabledGroups {
		assert.False(t, served[off], "%s is still served", off)
	}
	for _, gvr := range usedResources {
		_, err := c.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		assert.NoError(t, err, "list %s", gvr)
		w, err := c.Dynamic.Resource(gvr).Watch(ctx, metav1.ListOptions{})
		if assert.NoError(t, err, "watch %s", gvr) {
			w.Stop()
		}
	}

	// TokenRequest, TokenReview (istiod authenticates ztunnels) and access reviews.
	_, err = c.Client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tok, err := c.Client.CoreV1().ServiceAccounts("default").CreateToken(ctx, "probe",
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{"istio-ca"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	rev, err := c.Client.AuthenticationV1().TokenReviews().Create(ctx,
		&authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: tok.Status.Token, Audiences: []string{"istio-ca"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.True(t, rev.Status.Authenticated, "token review: %+v", rev.Status)
	assert.Equal(t, "system:serviceaccount:default:probe", rev.Status.User.Username)
	sar, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: "system:serviceaccount:default:probe", ResourceAttributes: &authzv1.ResourceAttributes{Verb: "list", Resource: "secrets"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.False(t, sar.Status.Allowed, "RBAC is on: a bare service account may not list secrets")
	_, err = c.Client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authzv1.ResourceAttributes{Verb: "list", Resource: "pods"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
}
