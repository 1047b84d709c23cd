//go:build tools

// Package kubebin pins the sources of Kubernetes that ambientmc builds and caches: kube-apiserver
// and kube-controller-manager for the local provider, and the rest of a kind node's binaries
// (kubelet, kubeadm, kubectl, kube-scheduler, kube-proxy) for the node image.
package kubebin

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
