package install

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
)

const (
	logTailLines  = 20
	eventTailSize = 10
	pollInterval  = time.Second
)

// check is one readiness condition of a component; ok returns "" when met, else what is missing.
type check struct {
	what string
	ok   func(ctx context.Context) string
	// workload is the namespace and selector of the pods whose logs explain a failure.
	namespace string
	selector  labels.Selector
	// involved are the object names whose events explain a failure.
	involved []string
}

// checks derives a component's readiness from its objects: Deployments Available, DaemonSets with
// numberReady == desiredNumberScheduled > 0, Gateways accepted by their class (which istiod
// creates), Programmed=True with an address other clusters reach (eastWestState), and their Deployment (named as the Gateway: the
// east-west class disables the name suffix) Available.
func checks(c *cluster.Cluster, comp Component) []check {
	var out []check
	for _, obj := range comp.Objects {
		ns, name := obj.GetNamespace(), obj.GetName()
		switch obj.GetKind() {
		case "Deployment":
			out = append(out, deploymentCheck(c, ns, name, selectorOf(obj)))
		case "DaemonSet":
			sel := selectorOf(obj)
			out = append(out, check{
				what: "DaemonSet " + ns + "/" + name, namespace: ns, selector: sel, involved: []string{name},
				ok: func(ctx context.Context) string {
					ds, err := c.Client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						return err.Error()
					}
					st := ds.Status
					if st.ObservedGeneration < ds.Generation {
						return fmt.Sprintf("generation %d not observed yet", ds.Generation)
					}
					if st.DesiredNumberScheduled == 0 || st.NumberReady != st.DesiredNumberScheduled || st.UpdatedNumberScheduled != st.DesiredNumberScheduled {
						return fmt.Sprintf("%d of %d pods ready, %d updated (desiredNumberScheduled must be > 0)", st.NumberReady, st.DesiredNumberScheduled, st.UpdatedNumberScheduled)
					}
					return ""
				},
			})
		case "Gateway":
			class, _, _ := unstructured.NestedString(obj.Object, "spec", "gatewayClassName")
			out = append(out, check{
				what: "GatewayClass " + class, involved: []string{class},
				ok: func(ctx context.Context) string {
					gc, err := c.GatewayAPI.GatewayV1().GatewayClasses().Get(ctx, class, metav1.GetOptions{})
					if err != nil {
						return err.Error() + " (istiod creates it when AMBIENT_ENABLE_MULTI_NETWORK=true)"
					}
					return conditionMissing(gc.Status.Conditions, string(gatewayv1.GatewayClassConditionStatusAccepted))
				},
			}, check{
				what: "Gateway " + ns + "/" + name, involved: []string{name},
				ok: func(ctx context.Context) string {
					gw, err := c.GatewayAPI.GatewayV1().Gateways(ns).Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						return err.Error()
					}
					_, miss, err := eastWestState(ctx, c, gw)
					if err != nil {
						return err.Error()
					}
					return miss
				},
			}, deploymentCheck(c, ns, name, labels.SelectorFromSet(labels.Set{"gateway.networking.k8s.io/gateway-name": name})))
		}
	}
	return out
}

func deploymentCheck(c *cluster.Cluster, ns, name string, sel labels.Selector) check {
	return check{
		what: "Deployment " + ns + "/" + name, namespace: ns, selector: sel, involved: []string{name},
		ok: func(ctx context.Context) string {
			d, err := c.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			// A re-applied Deployment is ready only once its new revision is.
			if d.Status.ObservedGeneration < d.Generation {
				return fmt.Sprintf("generation %d not observed yet", d.Generation)
			}
			if d.Spec.Replicas != nil && d.Status.UpdatedReplicas < *d.Spec.Replicas {
				return fmt.Sprintf("%d of %d replicas updated", d.Status.UpdatedReplicas, *d.Spec.Replicas)
			}
			for _, cond := range d.Status.Conditions {
				if cond.Type == "Available" {
					if cond.Status == corev1.ConditionTrue {
						return ""
					}
					return fmt.Sprintf("Available=%s: %s %s", cond.Status, cond.Reason, cond.Message)
				}
			}
			return fmt.Sprintf("no Available condition (%d of %d replicas ready)", d.Status.ReadyReplicas, d.Status.Replicas)
		},
	}
}

func selectorOf(obj *unstructured.Unstructured) labels.Selector {
	ml, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "selector", "matchLabels")
	return labels.SelectorFromSet(ml)
}

// waitReady polls every check of comp until all pass or timeout runs out; the error names the
// cluster, the component and what is missing, with the pod logs and events that explain it.
func waitReady(ctx context.Context, c *cluster.Cluster, comp Component, timeout time.Duration) error {
	cs := checks(c, comp)
	if len(cs) == 0 {
		return nil
	}
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		missing, _ := evaluate(ctx, cs)
		return len(missing) == 0, nil
	})
	if err == nil {
		return nil
	}
	// The wait's context is spent (its last checks may have failed on the deadline alone), so
	// the checks run once more, with the diagnostics, on a short context of their own.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	missing, failed := evaluate(dctx, cs)
	return fmt.Errorf("install: cluster %s: component %s not ready after %s: %s\n%s%w",
		c.Name, comp.Name, timeout, strings.Join(missing, "; "), diagnose(dctx, c, failed), err)
}

// evaluate runs every check and returns what is missing and the checks that failed.
func evaluate(ctx context.Context, cs []check) (missing []string, failed []check) {
	for _, ch := range cs {
		if m := ch.ok(ctx); m != "" {
			missing = append(missing, ch.what+": "+m)
			failed = append(failed, ch)
		}
	}
	return missing, failed
}

// diagnose collects, for the failed checks, each pod's state and log tail and the latest events.
func diagnose(ctx context.Context, c *cluster.Cluster, failed []check) string {
	var b strings.Builder
	for _, ch := range failed {
		fmt.Fprintf(&b, "--- %s\n", ch.what)
		if ch.selector != nil {
			pods, err := c.Client.CoreV1().Pods(ch.namespace).List(ctx, metav1.ListOptions{LabelSelector: ch.selector.String()})
			switch {
			case err != nil:
				fmt.Fprintf(&b, "pods: %v\n", err)
			case len(pods.Items) == 0:
				fmt.Fprintf(&b, "pods: none match %s (no controller created any, or none could be scheduled)\n", ch.selector)
			}
			if err == nil {
				for _, p := range pods.Items {
					writePod(ctx, &b, c, &p)
					ch.involved = append(ch.involved, p.Name)
				}
			}
		}
		writeEvents(ctx, &b, c, ch)
	}
	return b.String()
}

func writePod(ctx context.Context, b *strings.Builder, c *cluster.Cluster, p *corev1.Pod) {
	fmt.Fprintf(b, "pod %s: phase %s on node %q\n", p.Name, p.Status.Phase, p.Spec.NodeName)
	for _, st := range p.Status.ContainerStatuses {
		if w := st.State.Waiting; w != nil {
			fmt.Fprintf(b, "  container %s waiting: %s %s\n", st.Name, w.Reason, w.Message)
		}
	}
	for _, ctr := range p.Spec.Containers {
		lines := int64(logTailLines)
		data, err := c.Client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: ctr.Name, TailLines: &lines}).DoRaw(ctx)
		if err != nil {
			fmt.Fprintf(b, "  logs of %s: %v\n", ctr.Name, err)
			continue
		}
		fmt.Fprintf(b, "  last %d log lines of %s:\n", logTailLines, ctr.Name)
		for _, l := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
			fmt.Fprintf(b, "    %s\n", l)
		}
	}
}

func writeEvents(ctx context.Context, b *strings.Builder, c *cluster.Cluster, ch check) {
	ns := ch.namespace
	if ns == "" {
		ns = metav1.NamespaceAll
	}
	evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(b, "events: %v\n", err)
		return
	}
	involved := map[string]bool{}
	for _, n := range ch.involved {
		involved[n] = true
	}
	var mine []corev1.Event
	for _, e := range evs.Items {
		if involved[e.InvolvedObject.Name] {
			mine = append(mine, e)
		}
	}
	if len(mine) == 0 {
		fmt.Fprintf(b, "events: none\n")
		return
	}
	sort.Slice(mine, func(i, j int) bool { return eventTime(mine[i]).Before(eventTime(mine[j])) })
	if len(mine) > eventTailSize {
		mine = mine[len(mine)-eventTailSize:]
	}
	for _, e := range mine {
		fmt.Fprintf(b, "event %s %s/%s: %s: %s\n", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
}

func eventTime(e corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	return e.EventTime.Time
}

// conditionMissing returns "" when condition typ is True, else its status, reason and message.
func conditionMissing(conds []metav1.Condition, typ string) string {
	c := apimeta.FindStatusCondition(conds, typ)
	switch {
	case c == nil:
		return "no " + typ + " condition yet"
	case c.Status == metav1.ConditionTrue:
		return ""
	}
	return fmt.Sprintf("%s=%s: %s %s", typ, c.Status, c.Reason, c.Message)
}
