//go:build tools

// Package kubebin pins the sources of kube-apiserver, kube-controller-manager and etcd that ambientmc builds and caches.
// It is a separate module so that k8s.io/kubernetes and its staging replace directives stay out of
// the main go.mod.
package kubebin

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
