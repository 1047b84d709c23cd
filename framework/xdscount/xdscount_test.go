package xdscount

import (
	"context"
	"net"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	v3 "istio.io/istio/pilot/pkg/xds/v3"
)

// server answers every delta request with the responses it was given, in order.
type server struct {
	discovery.UnimplementedAggregatedDiscoveryServiceServer
	responses []*discovery.DeltaDiscoveryResponse
}

func (s *server) DeltaAggregatedResources(st discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	if _, err := st.Recv(); err != nil {
		return err
	}
	for _, r := range s.responses {
		if err := st.Send(r); err != nil {
			return err
		}
	}
	<-st.Context().Done()
	return nil
}

func response(typeURL string, n int, removed ...string) *discovery.DeltaDiscoveryResponse {
	r := &discovery.DeltaDiscoveryResponse{TypeUrl: typeURL, Nonce: "n", RemovedResources: removed}
	for i := range n {
		a, err := anypb.New(wrapperspb.String(string(rune('a' + i))))
		if err != nil {
			panic(err)
		}
		r.Resources = append(r.Resources, &discovery.Resource{Name: string(rune('a' + i)), Resource: a})
	}
	return r
}

// The counter sees each response on a real gRPC stream: one push per response, its resources and
// removals, and exactly the message's bytes.
func TestCounterCountsEveryResponseOnAStream(t *testing.T) {
	sent := []*discovery.DeltaDiscoveryResponse{response(v3.ClusterType, 3), response(v3.ClusterType, 1, "x", "y"), response(v3.ListenerType, 2)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer()
	discovery.RegisterAggregatedDiscoveryServiceServer(s, &server{responses: sent})
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)

	c := New()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), c.DialOption())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := discovery.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	require.NoError(t, err)
	require.NoError(t, st.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: v3.ClusterType}))
	for range sent {
		_, err := st.Recv()
		require.NoError(t, err)
	}

	got := c.Counts()
	assert.Equal(t, Count{Pushes: 2, Resources: 4, Removed: 2, Bytes: int64(proto.Size(sent[0]) + proto.Size(sent[1]))}, got["cds"])
	assert.Equal(t, Count{Pushes: 1, Resources: 2, Bytes: int64(proto.Size(sent[2]))}, got["lds"])
	assert.Equal(t, []string{"cds", "lds"}, got.Types())
	assert.Equal(t, int64(3), got.Total().Pushes)
}

func TestCountsSinceAndPlus(t *testing.T) {
	before := Counts{"cds": {Pushes: 1, Resources: 2, Bytes: 10}, "lds": {Pushes: 1, Bytes: 5}}
	after := Counts{"cds": {Pushes: 3, Resources: 5, Bytes: 40}, "lds": {Pushes: 1, Bytes: 5}, "eds": {Pushes: 1, Resources: 1, Bytes: 7}}
	d := after.Since(before)
	assert.Equal(t, Counts{"cds": {Pushes: 2, Resources: 3, Bytes: 30}, "eds": {Pushes: 1, Resources: 1, Bytes: 7}}, d, "an unchanged type is left out")
	assert.Equal(t, Count{Pushes: 3, Resources: 4, Bytes: 37}, d.Total())
	assert.Equal(t, Counts{"cds": {Pushes: 5, Resources: 8, Bytes: 70}, "eds": {Pushes: 2, Resources: 2, Bytes: 14}, "lds": {Pushes: 1, Bytes: 5}}, d.Plus(after))
	assert.Equal(t, Counts{"cds": {Pushes: 1}}, Counts(nil).Plus(Counts{"cds": {Pushes: 1}}))
}
