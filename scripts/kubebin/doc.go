// Package kubebin pins the sources of kube-apiserver, kube-controller-manager and etcd that ambientmc builds and caches.
package kubebin
