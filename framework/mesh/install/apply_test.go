package install

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/mesh/crds"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/provider/local/localtest"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// realCluster starts one local-provider cluster (a real kube-apiserver and etcd, no istiod, no
// kubelet, no controller-manager) with what the framework's environment installs before a mesh:
// the Istio and Gateway API CRDs and istio-system labelled with the network. It skips while the
// binaries are not built (`make bins`).
func realCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	return realClusterWith(t)
}

// realClusterWith is realCluster with only the CRDs named (all when none is): each CRD costs the
// API server CPU to build its OpenAPI documents, and the full set is most of such a test's CPU.
func realClusterWith(t *testing.T, names ...string) *cluster.Cluster {
	t.Helper()
	// No controller-manager: the tests write the workload controllers' status themselves.
	_, cs := localtest.APIServers(t, 1)
	ctx := context.Background()
	c := cs[0]
	root, err := bins.SourceRoot()
	require.NoError(t, err)
	set, err := crds.Load(ctx, root)
	require.NoError(t, err)
	if len(names) > 0 {
		set = slices.DeleteFunc(set, func(crd *unstructured.Unstructured) bool { return !slices.Contains(names, crd.GetName()) })
		require.Len(t, set, len(names), "CRDs %v", names)
	}
	require.NoError(t, crds.Apply(ctx, c.Dynamic, set))
	require.NoError(t, mesh.EnsureSystemNamespace(ctx, c))
	return c
}

// objectKey names an object across all resource types.
type objectKey struct {
	group, resource, namespace, name string
}

func (k objectKey) String() string {
	return fmt.Sprintf("%s.%s %s/%s", k.resource, k.group, k.namespace, k.name)
}

// snapshot lists every object of every listable resource type in c (metadata only), by UID.
func snapshot(t *testing.T, c *cluster.Cluster) map[objectKey]string {
	t.Helper()
	ctx := context.Background()
	lists, err := c.Client.Discovery().ServerPreferredResources()
	require.NoError(t, err)
	meta, err := metadata.NewForConfig(c.RESTConfig)
	require.NoError(t, err)
	out := map[objectKey]string{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		require.NoError(t, err)
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			// The API server records its own Events, unrelated to the install.
			if r.Name == "events" {
				continue
			}
			objs, err := meta.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{})
			require.NoError(t, err, "listing %s", r.Name)
			for _, o := range objs.Items {
				out[objectKey{gv.Group, r.Name, o.Namespace, o.Name}] = string(o.UID)
			}
		}
	}
	return out
}

func TestApplyToRealAPIServer(t *testing.T) {
	t.Parallel() // each on its own API server; most of the time is waiting on it
	c := realCluster(t)
	ctx := context.Background()
	// No controller-manager runs here, so nothing deletes a namespace's contents or finalizes
	// it: a namespace Apply created could never be torn down. probe therefore exists before,
	// as istio-system does, which also shows that pre-existing objects are left alone.
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workload.ProbeNamespace}}, metav1.CreateOptions{})
	require.NoError(t, err)

	root, err := pki.NewRoot()
	require.NoError(t, err)
	ca, err := root.NewIntermediate(c.Name)
	require.NoError(t, err)
	m, err := Render(Options{Cluster: c.Cluster, Images: Images{Hub: testHub, Tag: testTag}, CACerts: ca,
		Probes: &ProbeOptions{Role: RoleClient, Apps: []string{workload.EchoLocal, workload.EchoRemote, workload.EchoFailover}}})
	require.NoError(t, err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))
	keyOf := func(o *unstructured.Unstructured) objectKey {
		gvk := o.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "%s %s", gvk, o.GetName())
		return objectKey{gvk.Group, mapping.Resource.Resource, o.GetNamespace(), o.GetName()}
	}

	t.Run("ServerSideApplyAndTeardown", func(t *testing.T) {
		before := snapshot(t, c)
		var log bytes.Buffer
		// Wait: false, because nothing here can become ready: there is no kubelet to run pods,
		// no controller to create them and no istiod to program the gateway.
		inst, err := Apply(ctx, c, m, ApplyOptions{Wait: false, Log: &log})
		require.NoError(t, err)
		t.Log(log.String())
		assert.Contains(t, log.String(), "cluster-1: install: ztunnel: 2 objects applied (2 created)")

		var wantCreated, preexisting []objectKey
		rendered := 0
		for _, comp := range m.Components {
			for _, o := range comp.Objects {
				rendered++
				k := keyOf(o)
				got, err := c.Dynamic.Resource(schema.GroupVersionResource{Group: k.group, Version: o.GroupVersionKind().Version, Resource: k.resource}).
					Namespace(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
				require.NoError(t, err, "%s was not accepted", k)
				assert.True(t, slices.ContainsFunc(got.GetManagedFields(), func(f metav1.ManagedFieldsEntry) bool {
					return f.Manager == FieldManager && f.Operation == metav1.ManagedFieldsOperationApply
				}), "%s: server-side applied by %s", k, FieldManager)
				if uid, ok := before[k]; ok {
					preexisting = append(preexisting, k)
					assert.Equal(t, uid, string(got.GetUID()), "%s existed before and was updated in place", k)
				} else {
					wantCreated = append(wantCreated, k)
				}
			}
		}
		var created []objectKey
		for _, o := range inst.Created {
			created = append(created, objectKey{o.GVR.Group, o.GVR.Resource, o.Namespace, o.Name})
		}
		assert.Equal(t, wantCreated, created, "Apply records exactly the objects it created, in apply order")
		assert.Contains(t, preexisting, objectKey{"", "namespaces", "", mesh.SystemNamespace})
		assert.Contains(t, preexisting, objectKey{"", "namespaces", "", workload.ProbeNamespace})
		assert.Contains(t, preexisting, objectKey{"apiextensions.k8s.io", "customresourcedefinitions", "", "gateways.gateway.networking.k8s.io"})
		assert.Contains(t, preexisting, objectKey{"apiextensions.k8s.io", "customresourcedefinitions", "", "destinationrules.networking.istio.io"})
		assert.Contains(t, created, objectKey{"", "secrets", mesh.SystemNamespace, pki.CACertsSecret})
		assert.Contains(t, created, objectKey{"apps", "deployments", mesh.SystemNamespace, "istiod"})
		assert.Contains(t, created, objectKey{"gateway.networking.k8s.io", "gateways", mesh.SystemNamespace, mesh.EastWestGateway})
		t.Logf("%d objects rendered: %d created, %d existed before", rendered, len(created), len(preexisting))

		// What each component's wait would report here, where nothing becomes ready.
		err = waitReady(ctx, c, *m.Component(ComponentZtunnel), time.Second)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "component ztunnel not ready after 1s: DaemonSet istio-system/ztunnel: generation 1 not observed yet")
		err = waitReady(ctx, c, *m.Component(ComponentEastWestGateway), time.Second)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `GatewayClass istio-east-west: gatewayclasses.gateway.networking.k8s.io "istio-east-west" not found (istiod creates it when AMBIENT_ENABLE_MULTI_NETWORK=true)`)
		assert.Contains(t, err.Error(), "Gateway istio-system/istio-eastwestgateway: Programmed=Unknown: Pending Waiting for controller")
		assert.Contains(t, err.Error(), `Deployment istio-system/istio-eastwestgateway: deployments.apps "istio-eastwestgateway" not found`)

		// The east-west address: none until someone (a LoadBalancer via istiod; here the test,
		// standing in for both) writes it into the Gateway's status and marks it Programmed.
		_, err = EastWestAddress(ctx, c, 2*time.Second)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "cluster cluster-1: east-west gateway istio-system/istio-eastwestgateway has no address other clusters reach: Programmed=Unknown: Pending Waiting for controller; status.addresses is empty")
		setGatewayStatus(t, c, "True", "Programmed", "127.201.0.1")
		addr, err := EastWestAddress(ctx, c, 10*time.Second)
		require.NoError(t, err)
		assert.Equal(t, "127.201.0.1", addr)

		require.NoError(t, inst.Teardown(ctx))
		after := snapshot(t, c)
		assert.Equal(t, before, after, "after Teardown the cluster holds exactly the objects it held before, with the same UIDs")
		for _, k := range preexisting {
			assert.Contains(t, after, k, "pre-existing %s was not deleted", k)
		}
	})

	t.Run("WaitFailsNamingComponentAndCluster", func(t *testing.T) {
		before := snapshot(t, c)
		start := time.Now()
		inst, err := Apply(ctx, c, m, ApplyOptions{Wait: true, Timeout: 3 * time.Second})
		took := time.Since(start)
		require.Error(t, err, "istiod cannot become Available without a kubelet")
		t.Cleanup(func() { _ = inst.Teardown(context.Background()) })
		msg := err.Error()
		t.Log(msg)
		assert.Contains(t, msg, "install: cluster cluster-1: component istiod not ready after 3s")
		assert.Contains(t, msg, "Deployment istio-system/istiod: generation 1 not observed yet", "no controller runs here")
		assert.Contains(t, msg, "pods: none match istio=pilot", "the diagnosis says why")
		// istio-cni depends on base alone, as in Istio's installer: it was applied beside istiod,
		// failed its own wait, and the error names it too.
		assert.Contains(t, msg, "install: cluster cluster-1: component cni not ready after 3s")
		assert.Less(t, took, time.Minute, "the timeout bounds the wait")
		applied := map[string]bool{}
		for _, o := range inst.Created {
			applied[o.Component] = true
		}
		assert.True(t, applied[ComponentCNI], "istio-cni does not wait for istiod")
		for _, after := range []string{ComponentZtunnel, ComponentEastWestGateway, ComponentProbes} {
			assert.False(t, applied[after], "%s depends on a failed component and must not be applied", after)
		}
		require.NoError(t, inst.Teardown(ctx))
		assert.Equal(t, before, snapshot(t, c))
	})

	// The pod and event stand in for what a ReplicaSet controller and a kubelet would write when
	// istiod's image cannot be pulled; the diagnosis must carry both.
	t.Run("WaitFailureCarriesPodStateAndEvents", func(t *testing.T) {
		// The default service account is what a controller-manager would have created.
		sas := c.Client.CoreV1().ServiceAccounts(mesh.SystemNamespace)
		_, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = sas.Delete(context.Background(), "default", metav1.DeleteOptions{}) })
		pods := c.Client.CoreV1().Pods(mesh.SystemNamespace)
		pod, err := pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "istiod-stuck", Labels: map[string]string{"istio": "pilot"}},
			Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "discovery", Image: testHub + "/pilot:" + testTag}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = pods.Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}) // no kubelet to confirm a graceful stop
		})
		pod.Status.Phase = corev1.PodPending
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "discovery", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"},
		}}}
		_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		require.NoError(t, err)
		_, err = c.Client.CoreV1().Events(mesh.SystemNamespace).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "istiod-stuck.pull"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: mesh.SystemNamespace, Name: pod.Name},
			Type:           corev1.EventTypeWarning, Reason: "Failed", Message: "Failed to pull image " + testHub + "/pilot:" + testTag,
			LastTimestamp: metav1.Now(),
		}, metav1.CreateOptions{})
		require.NoError(t, err)

		inst, err := Apply(ctx, c, m, ApplyOptions{Wait: true, Timeout: 3 * time.Second})
		require.Error(t, err)
		t.Cleanup(func() { _ = inst.Teardown(context.Background()) })
		msg := err.Error()
		t.Log(msg)
		assert.Contains(t, msg, "component istiod not ready after 3s")
		assert.Contains(t, msg, "pod istiod-stuck: phase Pending on node \"node-1\"")
		assert.Contains(t, msg, "container discovery waiting: ImagePullBackOff Back-off pulling image")
		assert.Contains(t, msg, "event Warning Pod/istiod-stuck: Failed: Failed to pull image example.com/hub/pilot:t1")
		assert.Contains(t, msg, "logs of discovery:", "the log tail is asked for (this API server has no kubelet to serve it)")
		require.NoError(t, inst.Teardown(ctx))
	})

	// The statuses are written by the test, standing in for the controllers, kubelets and istiod
	// this API server lacks; the waits must pass on them and only then move on.
	t.Run("WaitPassesOnReadyStatus_StatusWrittenByTest", func(t *testing.T) {
		before := snapshot(t, c)
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
					markReady(ctx, c)
				}
			}
		}()
		var log bytes.Buffer
		inst, err := Apply(ctx, c, m, ApplyOptions{Wait: true, Timeout: time.Minute, Log: &log})
		close(stop)
		<-done
		t.Cleanup(func() { _ = inst.Teardown(context.Background()) })
		require.NoError(t, err)
		assert.Contains(t, log.String(), "install: probes:", "every component passed its wait")
		addr, err := EastWestAddress(ctx, c, time.Second)
		require.NoError(t, err)
		assert.Equal(t, "127.201.0.1", addr)

		require.NoError(t, inst.Teardown(ctx))
		// What the stand-ins made is not Apply's, so Teardown left it; the test removes it.
		require.NoError(t, c.Client.AppsV1().Deployments(mesh.SystemNamespace).Delete(ctx, mesh.EastWestGateway, metav1.DeleteOptions{}))
		require.NoError(t, c.GatewayAPI.GatewayV1().GatewayClasses().Delete(ctx, mesh.EastWestGatewayClass, metav1.DeleteOptions{}))
		assert.Equal(t, before, snapshot(t, c))
	})

	t.Run("RefusesToReplaceAForeignCACerts", func(t *testing.T) {
		foreignRoot, err := pki.NewRoot()
		require.NoError(t, err)
		foreign, err := foreignRoot.NewIntermediate(c.Name)
		require.NoError(t, err)
		secrets := c.Client.CoreV1().Secrets(mesh.SystemNamespace)
		_, err = secrets.Create(ctx, foreign.CACertsSecret(), metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = secrets.Delete(context.Background(), pki.CACertsSecret, metav1.DeleteOptions{}) })

		inst, err := Apply(ctx, c, m, ApplyOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "install: cluster cluster-1: component base: istio-system/cacerts already exists with another root CA")
		assert.Contains(t, err.Error(), "kubectl -n istio-system delete secret cacerts")
		got, err := secrets.Get(ctx, pki.CACertsSecret, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, foreign.RootPEM, got.Data[pki.RootCertFile], "the cluster's CA is untouched")
		require.NoError(t, inst.Teardown(ctx))
	})

	t.Run("RejectsManifestsOfAnotherCluster", func(t *testing.T) {
		other := *m
		other.Cluster = "cluster-9"
		_, err := Apply(ctx, c, &other, ApplyOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "manifests rendered for cluster cluster-9 cannot be applied to cluster cluster-1")
	})
}

// markReady writes what controllers, kubelets and istiod would: every Deployment and DaemonSet
// reports its pods ready, istiod's east-west GatewayClass is Accepted, the east-west Gateway is
// Programmed with an address, and the gateway's Deployment exists. Errors are retried next tick.
func markReady(ctx context.Context, c *cluster.Cluster) {
	apps := c.Client.AppsV1()
	if ds, err := apps.DaemonSets("").List(ctx, metav1.ListOptions{}); err == nil {
		for _, d := range ds.Items {
			d.Status = appsv1.DaemonSetStatus{ObservedGeneration: d.Generation, DesiredNumberScheduled: 1, CurrentNumberScheduled: 1,
				NumberReady: 1, UpdatedNumberScheduled: 1, NumberAvailable: 1}
			_, _ = apps.DaemonSets(d.Namespace).UpdateStatus(ctx, &d, metav1.UpdateOptions{})
		}
	}
	if ds, err := apps.Deployments("").List(ctx, metav1.ListOptions{}); err == nil {
		for _, d := range ds.Items {
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}}}
			_, _ = apps.Deployments(d.Namespace).UpdateStatus(ctx, &d, metav1.UpdateOptions{})
		}
	}
	cond := func(typ string) []metav1.Condition {
		return []metav1.Condition{{Type: typ, Status: metav1.ConditionTrue, Reason: typ, Message: "written by the test", LastTransitionTime: metav1.Now()}}
	}
	classes := c.GatewayAPI.GatewayV1().GatewayClasses()
	gc, err := classes.Get(ctx, mesh.EastWestGatewayClass, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		gc, err = classes.Create(ctx, &gatewayv1.GatewayClass{
			ObjectMeta: metav1.ObjectMeta{Name: mesh.EastWestGatewayClass},
			Spec:       gatewayv1.GatewayClassSpec{ControllerName: "istio.io/eastwest-controller"},
		}, metav1.CreateOptions{})
	}
	accepted := string(gatewayv1.GatewayClassConditionStatusAccepted)
	if err == nil && !apimeta.IsStatusConditionTrue(gc.Status.Conditions, accepted) {
		gc.Status.Conditions = cond(accepted)
		_, _ = classes.UpdateStatus(ctx, gc, metav1.UpdateOptions{})
	}
	gws := c.GatewayAPI.GatewayV1().Gateways(mesh.SystemNamespace)
	programmed := string(gatewayv1.GatewayConditionProgrammed)
	if gw, err := gws.Get(ctx, mesh.EastWestGateway, metav1.GetOptions{}); err == nil && !apimeta.IsStatusConditionTrue(gw.Status.Conditions, programmed) {
		ip := gatewayv1.IPAddressType
		gw.Status.Conditions = cond(programmed)
		gw.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Type: &ip, Value: "127.201.0.1"}}
		_, _ = gws.UpdateStatus(ctx, gw, metav1.UpdateOptions{})
		sel := map[string]string{"gateway.networking.k8s.io/gateway-name": mesh.EastWestGateway}
		_, _ = apps.Deployments(mesh.SystemNamespace).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: mesh.EastWestGateway, Labels: sel},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "istio-proxy", Image: testHub + "/proxyv2:" + testTag}}},
			}},
		}, metav1.CreateOptions{})
	}
}
