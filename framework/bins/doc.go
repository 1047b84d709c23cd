// Package bins builds the binaries the local provider runs (kube-apiserver, etcd, pilot-discovery)
// from pinned sources and caches them per version and platform.
package bins
