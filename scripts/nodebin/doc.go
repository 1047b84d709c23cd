// Package nodebin holds the modules that pin what a kind node runs besides Kubernetes itself
// (scripts/kubebin): containerd, crictl, the CNI plugins, CoreDNS, MetalLB, the pause program,
// and the registry -kind.registry runs beside the nodes. Each is a module of its own so that every
// project is built with its own dependency pins; `make images` builds them through the binary
// cache (framework/bins).
package nodebin
