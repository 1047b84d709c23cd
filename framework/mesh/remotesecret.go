package mesh

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"istio.io/istio/operator/pkg/component"
	"istio.io/istio/operator/pkg/render"
	"istio.io/istio/pkg/config/constants"
	"istio.io/istio/pkg/kube/multicluster"
	authv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/kubeconfig"
)

const (
	// clusterAnnotation is what `istioctl create-remote-secret` puts on its secrets.
	clusterAnnotation = "networking.istio.io/cluster"
	// readerTokenSeconds outlives any run; the TokenRequest API needs no controller-manager.
	readerTokenSeconds = 24 * 3600
)

// RemoteSecretName is the name istioctl gives the secret for cluster.
func RemoteSecretName(cluster string) string { return "istio-remote-secret-" + cluster }

var readerRBAC struct {
	once sync.Once
	objs []*unstructured.Unstructured
	err  error
}

// readerObjects renders the istio-reader service account, ClusterRole and ClusterRoleBinding from
// the pinned Istio charts, exactly as `istioctl create-remote-secret` selects them.
func readerObjects() ([]*unstructured.Unstructured, error) {
	readerRBAC.once.Do(func() {
		sets, _, err := render.GenerateManifest(nil, []string{"values.global.istioNamespace=" + SystemNamespace}, false, nil, nil)
		if err != nil {
			readerRBAC.err = fmt.Errorf("rendering the istio-reader RBAC from the Istio charts: %w", err)
			return
		}
		for _, set := range sets {
			if set.Component != component.BaseComponentName && set.Component != component.PilotComponentName {
				continue
			}
			for _, m := range set.Manifests {
				kind, name := m.GetKind(), m.GetName()
				if (kind == "ClusterRole" || kind == "ClusterRoleBinding") && strings.HasPrefix(name, "istio-reader-clusterrole") ||
					kind == "ServiceAccount" && name == constants.DefaultServiceAccountName {
					readerRBAC.objs = append(readerRBAC.objs, m.Unstructured)
				}
			}
		}
		if len(readerRBAC.objs) != 3 {
			readerRBAC.err = fmt.Errorf("rendering the istio-reader RBAC: want a ServiceAccount, ClusterRole and ClusterRoleBinding, got %d objects", len(readerRBAC.objs))
		}
	})
	return readerRBAC.objs, readerRBAC.err
}

// RemoteSecret builds the Secret that lets another cluster's istiod read cluster c: a bearer-token
// kubeconfig of the istio-reader service account, in the form `istioctl create-remote-secret`
// produces. It creates the reader RBAC in c first if needed.
func RemoteSecret(ctx context.Context, c *cluster.Cluster) (*corev1.Secret, error) {
	// The kubeconfig first: a broken one must fail before anything is created in the cluster.
	server, err := internalServer(c)
	if err != nil {
		return nil, err
	}
	objs, err := readerObjects()
	if err != nil {
		return nil, err
	}
	created := false
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: strings.ToLower(gvk.Kind) + "s"}
		api := c.Dynamic.Resource(gvr)
		var err error
		if o.GetNamespace() != "" || gvk.Kind == "ServiceAccount" {
			_, err = api.Namespace(SystemNamespace).Create(ctx, o, metav1.CreateOptions{})
		} else {
			_, err = api.Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("cluster %s: creating %s %s: %w", c.Name, gvk.Kind, o.GetName(), err)
		}
		created = created || err == nil
	}
	if created {
		if err := waitReaderAuthorized(ctx, c); err != nil {
			return nil, err
		}
	}
	exp := int64(readerTokenSeconds)
	tok, err := c.Client.CoreV1().ServiceAccounts(SystemNamespace).CreateToken(ctx, constants.DefaultServiceAccountName,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: token for %s: %w", c.Name, constants.DefaultServiceAccountName, err)
	}
	data, err := kubeconfig.Bytes(kubeconfig.TokenFor(c.Name, server, tok.Status.Token))
	if err != nil {
		return nil, err
	}
	return SecretFor(c.Name, data), nil
}

// readerAuthorizedWithin bounds the wait for RBAC just created to take effect.
const readerAuthorizedWithin = 10 * time.Second

// waitReaderAuthorized waits until c's authorizer lets the istio-reader list services: the RBAC
// authorizer learns of a new ClusterRoleBinding from its informer, a moment after the create, and
// a reader used before then is refused (a test met "services is forbidden" right after this
// function returned). A caller whose credentials may not create SubjectAccessReviews is not kept
// waiting.
func waitReaderAuthorized(ctx context.Context, c *cluster.Cluster) error {
	user := "system:serviceaccount:" + SystemNamespace + ":" + constants.DefaultServiceAccountName
	var last error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, readerAuthorizedWithin, true, func(ctx context.Context) (bool, error) {
		r, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: user, ResourceAttributes: &authzv1.ResourceAttributes{Verb: "list", Resource: "services"}}}, metav1.CreateOptions{})
		switch {
		case apierrors.IsForbidden(err):
			return true, nil
		case err != nil:
			last = err
			return false, nil
		}
		last = fmt.Errorf("not allowed yet (%s)", r.Status.Reason)
		return r.Status.Allowed, nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s: the istio-reader RBAC created for the remote secret is not in effect after %s (SubjectAccessReview for %s to list services: %v)",
			c.Name, readerAuthorizedWithin, user, last)
	}
	return nil
}

// internalServer is the cluster entry of c's internal kubeconfig's current context, flattened as
// `kubectl config view --flatten --minify` flattens it: a CA file it names (relative paths are
// relative to the kubeconfig) is read into certificate-authority-data, because the remote istiod
// reads the secret far from that file; tls-server-name, insecure-skip-tls-verify and proxy-url
// stay as they are.
func internalServer(c *cluster.Cluster) (*clientcmdapi.Cluster, error) {
	internal, err := clientcmd.LoadFromFile(c.InternalKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: internal kubeconfig: %w", c.Name, err)
	}
	kctx := internal.Contexts[internal.CurrentContext]
	if kctx == nil {
		return nil, fmt.Errorf("cluster %s: internal kubeconfig %s has no context %q (its current-context): fix the kubeconfig",
			c.Name, c.InternalKubeconfig, internal.CurrentContext)
	}
	if internal.Clusters[kctx.Cluster] == nil {
		return nil, fmt.Errorf("cluster %s: internal kubeconfig %s: context %q names cluster %q, which it does not define",
			c.Name, c.InternalKubeconfig, internal.CurrentContext, kctx.Cluster)
	}
	// Only the cluster entry is used (the secret carries the reader's token), so the context's
	// user does not have to exist or be flattenable.
	kctx.AuthInfo = ""
	if err := clientcmdapi.MinifyConfig(internal); err != nil {
		return nil, fmt.Errorf("cluster %s: internal kubeconfig %s: %w", c.Name, c.InternalKubeconfig, err)
	}
	if err := clientcmdapi.FlattenConfig(internal); err != nil {
		return nil, fmt.Errorf("cluster %s: internal kubeconfig %s: inlining the files it names (as kubectl config view --flatten does): %w; fix the path or embed certificate-authority-data",
			c.Name, c.InternalKubeconfig, err)
	}
	return internal.Clusters[kctx.Cluster], nil
}

// SecretFor wraps a kubeconfig for cluster into a remote secret as istioctl lays it out: label
// istio/multiCluster=true, the cluster annotation, and the cluster ID as the data key.
func SecretFor(cluster string, kubeconfig []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:        RemoteSecretName(cluster),
			Namespace:   SystemNamespace,
			Annotations: map[string]string{clusterAnnotation: cluster},
			Labels:      map[string]string{multicluster.MultiClusterSecretLabel: "true"},
		},
		Data: map[string][]byte{cluster: kubeconfig},
	}
}

// ApplySecret creates (or replaces) a remote secret in cluster into.
func ApplySecret(ctx context.Context, into *cluster.Cluster, s *corev1.Secret) error {
	api := into.Client.CoreV1().Secrets(SystemNamespace)
	_, err := api.Create(ctx, s, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = api.Update(ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("cluster %s: remote secret %s: %w", into.Name, s.Name, err)
	}
	return nil
}

// DeleteSecret removes the remote secret for cluster remote from cluster from.
func DeleteSecret(ctx context.Context, from *cluster.Cluster, remote string) error {
	err := from.Client.CoreV1().Secrets(SystemNamespace).Delete(ctx, RemoteSecretName(remote), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("cluster %s: deleting remote secret for %s: %w", from.Name, remote, err)
	}
	return nil
}
