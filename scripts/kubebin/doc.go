// Package kubebin pins the sources of kube-apiserver and etcd that ambientmc builds and caches.
package kubebin
