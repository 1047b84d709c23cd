package churn

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/workload"
)

// Truth reads the cluster's scale pods from its API server and returns what the watcher should
// hold for every key the runs touched: a local pod's health (or Absent once deleted), a remote
// service's capacity (every pod with an IP counts, Ready or not). It also checks that the API
// agrees with what this churner thinks is live.
func (p *Pods) Truth(ctx context.Context) (map[string]string, error) {
	truth := map[string]string{}
	perSvc := make([]int, p.scale.Services)
	live := map[string]bool{}
	for k := range p.scale.Namespaces {
		ns := workload.NamespaceName(k)
		list, err := p.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("cluster %s: listing pods in %s: %w", p.c.Name, ns, err)
		}
		for _, kp := range list.Items {
			svc, ok := serviceIndex(kp.Labels["app"])
			if !ok || svc >= p.scale.Services || kp.Status.PodIP == "" {
				continue
			}
			perSvc[svc]++
			key := PodUID(p.c.Name, ns, kp.Name)
			live[key] = true
			if !p.remote {
				state := Unhealthy
				if podReady(&kp) {
					state = Healthy
				}
				truth[key] = state
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(live) != len(p.order) {
		return nil, fmt.Errorf("cluster %s: the API server has %d scale pods, the churner expected %d", p.c.Name, len(live), len(p.order))
	}
	if p.remote {
		for svc, key := range p.shKeys {
			truth[key] = Capacity(perSvc[svc])
		}
		return truth, nil
	}
	for key := range p.touched {
		if !live[key] {
			truth[key] = Absent
		}
	}
	return truth, nil
}
