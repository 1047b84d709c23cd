package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	nodeutil "k8s.io/component-helpers/node/util"

	"github.com/ambientmc/ambientmc/framework/cluster"
)

// What a kubelet writes, written the way a kubelet writes it: patches to the status subresource,
// which carry no resourceVersion, so the controllers that touch the same objects (TTL and node
// IPAM annotate and update a node within milliseconds of its creation) cannot make them conflict.

// ReadyNodeStatus is the status a kubelet reports for a healthy node at address ip.
func ReadyNodeStatus(c *cluster.Cluster, name string, ip netip.Addr) corev1.NodeStatus {
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, st corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: st, Reason: reason, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
		},
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: ip.String()},
			{Type: corev1.NodeHostName, Address: name},
		},
		NodeInfo: corev1.NodeSystemInfo{KubeletVersion: c.KubernetesVersion, OperatingSystem: "linux", Architecture: "amd64"},
	}
}

// PatchNodeStatus writes status into node n with the kubelet's own code (a strategic merge patch
// of the difference, k8s.io/component-helpers/node/util) and returns the node as stored.
func PatchNodeStatus(c *cluster.Cluster, n *corev1.Node, status corev1.NodeStatus) (*corev1.Node, error) {
	want := n.DeepCopy()
	want.Status = status
	got, _, err := nodeutil.PatchNodeStatus(c.Client.CoreV1(), types.NodeName(n.Name), n, want)
	return got, err
}

// PatchPodStatus writes status into pod p as a strategic merge patch to the status subresource,
// with p's UID in the patch so that it cannot land on a recreated pod of the same name (what the
// kubelet's own status manager does).
func PatchPodStatus(ctx context.Context, c *cluster.Cluster, p *corev1.Pod, status corev1.PodStatus) error {
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": p.UID},
		"status":   status,
	})
	if err != nil {
		return err
	}
	_, err = c.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("status of pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// RunningStatus is the status a kubelet writes for a running pod: the phase, the conditions the
// EndpointSlice controller reads (Ready) and those kubectl shows, a running container and the
// pod's addresses. istiod makes a workload only of a pod with an IP and a non-terminal phase, and
// marks it healthy only when Ready.
func RunningStatus(podIP, hostIP netip.Addr, ready bool) corev1.PodStatus {
	now := metav1.Now()
	cond := func(t corev1.PodConditionType, ok bool) corev1.PodCondition {
		st := corev1.ConditionTrue
		if !ok {
			st = corev1.ConditionFalse
		}
		return corev1.PodCondition{Type: t, Status: st, LastTransitionTime: now}
	}
	container := corev1.ContainerStatus{
		Name: AppContainer, Image: AppImage, ImageID: AppImage, ContainerID: "containerd://ambientmc",
		Ready: ready, Started: new(true),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
	}
	return corev1.PodStatus{
		ContainerStatuses: []corev1.ContainerStatus{container},
		Phase:             corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			cond(corev1.PodReadyToStartContainers, true), cond(corev1.PodInitialized, true),
			cond(corev1.ContainersReady, ready), cond(corev1.PodReady, ready), cond(corev1.PodScheduled, true),
		},
		HostIP:    hostIP.String(),
		HostIPs:   []corev1.HostIP{{IP: hostIP.String()}},
		PodIP:     podIP.String(),
		PodIPs:    []corev1.PodIP{{IP: podIP.String()}},
		QOSClass:  corev1.PodQOSBestEffort,
		StartTime: &now,
	}
}
