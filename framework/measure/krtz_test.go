package measure

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKrtCollections(t *testing.T) {
	body := `[{"uid":1,"name":"informer/Namespaces","state":{"synced":true}},{"uid":7,"name":"cluster[c2]/informer/Pods","state":{"outputs":{"a":1},"synced":true}}]`
	i, srv := debugServer(t, KrtzPath, &body)
	names, err := i.KrtCollections(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"informer/Namespaces", "cluster[c2]/informer/Pods"}, names)

	body = `{"not":"a dump"}`
	_, err = i.KrtCollections(context.Background())
	assert.ErrorContains(t, err, "/debug/krtz: decoding")
	body = `[{"uid":1}]`
	_, err = i.KrtCollections(context.Background())
	assert.ErrorContains(t, err, "not a krt dump")
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "json: unsupported type", http.StatusInternalServerError)
	})
	_, err = i.KrtCollections(context.Background())
	assert.ErrorContains(t, err, "HTTP 500 Internal Server Error: json: unsupported type", "istiod's reason is kept")
	_, err = (&Sampler{Name: "c1"}).KrtCollections(context.Background())
	assert.ErrorContains(t, err, "no debug URL")
}
