package identity

import (
	"context"
	"fmt"
	"sync"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TokenTTL is how long a token lasts: what ztunnel's chart asks the kubelet for (its projected
// istio-token, expirationSeconds 43200).
const TokenTTL = 12 * time.Hour

// Token returns a token source for service account ns/sa as the kubelet projects one into a pod:
// requested from the cluster's API server (TokenRequest) for Audience, bound to pod when there is
// one (istiod's node authorizer reads the caller's pod, and so its node, from the reviewed
// token), and requested again once 80% of its life has passed, as the kubelet rotates it.
func Token(client kubernetes.Interface, ns, sa string, pod *corev1.Pod) func() (string, error) {
	var mu sync.Mutex
	var token string
	var renew time.Time
	return func() (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if token != "" && time.Now().Before(renew) {
			return token, nil
		}
		spec := authv1.TokenRequestSpec{Audiences: []string{Audience}, ExpirationSeconds: new(int64(TokenTTL.Seconds()))}
		if pod != nil {
			spec.BoundObjectRef = &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		tr, err := client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return "", fmt.Errorf("identity: a token for %s/%s: %w", ns, sa, err)
		}
		token = tr.Status.Token
		renew = start.Add(tr.Status.ExpirationTimestamp.Sub(start) * 8 / 10)
		return token, nil
	}
}
