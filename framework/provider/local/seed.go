package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/etcdstate"
	"github.com/ambientmc/ambientmc/framework/mesh/crds"
)

// PreloadCRDs tells Create which CRDs every cluster must have and returns the ones to apply: the
// same CRDs slimmed (crds.Slim). If a seed of exactly those exists for this kube-apiserver build,
// Create stores it in each cluster before the API server starts; otherwise SaveCRDSeed captures
// one after the CRDs were created through the API. Watched-only clusters have a seed of their
// own, of the same CRDs as they hold them (crds.Set.WhereNoIstiod).
func (p *Provider) PreloadCRDs(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	if p.paths == nil {
		return nil, fmt.Errorf("local provider: Preflight must run before PreloadCRDs")
	}
	objs = crds.Slim(objs)
	whole, err := p.findSeed(objs)
	if err != nil {
		return nil, err
	}
	var watched seedSlot
	if p.opts.IstiodClusters != nil {
		if watched, err = p.findSeed(crds.Set(objs).WhereNoIstiod()); err != nil {
			return nil, err
		}
	}
	p.mu.Lock()
	p.seeds = map[bool]seedSlot{false: whole, true: watched}
	p.mu.Unlock()
	return objs, nil
}

// seedSlot is one seed file and, once loaded, its seed (nil: none yet).
type seedSlot struct {
	file string
	seed *etcdstate.CRDSeed
}

// findSeed picks the seed file for objs and loads it if a complete one exists.
func (p *Provider) findSeed(objs []*unstructured.Unstructured) (seedSlot, error) {
	h := sha256.New()
	h.Write([]byte(etcdstate.SeedFormat))
	for _, o := range objs {
		raw, err := json.Marshal(o.Object)
		if err != nil {
			return seedSlot{}, err
		}
		h.Write(raw)
	}
	dir := p.seedDir
	if dir == "" {
		dir = filepath.Dir(p.paths[bins.KubeAPIServer])
	}
	slot := seedSlot{file: filepath.Join(dir, "crd-seed-"+hex.EncodeToString(h.Sum(nil))[:16]+".json")}
	raw, err := os.ReadFile(slot.file)
	if os.IsNotExist(err) {
		return slot, nil
	}
	if err != nil {
		return slot, err
	}
	var s etcdstate.CRDSeed
	if err := json.Unmarshal(raw, &s); err != nil || len(s.Entries) != len(objs) {
		// A damaged or partial seed is rebuilt, never used.
		return slot, os.Remove(slot.file)
	}
	slot.seed = &s
	return slot, nil
}

// SeededCRDs says whether Create stored the CRDs from a seed (in watched-only clusters, from
// theirs or else the served ones from the whole seed).
func (p *Provider) SeededCRDs() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seeds[false].seed != nil
}

// seededBoth says whether both seeds, the whole clusters' and the watched-only ones', exist.
func (p *Provider) seededBoth() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seeds[false].seed != nil && p.seeds[true].seed != nil
}

// seedOf returns the seed a cluster stores before its API server starts: a watched-only one
// theirs, or else the entries of the whole seed it serves (seedFor).
func (p *Provider) seedOf(watchedOnly bool) *etcdstate.CRDSeed {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.seeds[watchedOnly].seed; s != nil {
		return s
	}
	return seedFor(p.seeds[false].seed, watchedOnly)
}

// SaveCRDSeed captures c's CRDs (created through its API and Established) as the seed for later
// runs of clusters like c (whole or watched-only), unless this run started from one.
func (p *Provider) SaveCRDSeed(ctx context.Context, c *cluster.Cluster) error {
	p.mu.Lock()
	slot, etcd := p.seeds[p.watchedOnly(c.Name)], p.etcd
	file, seeded := slot.file, slot.seed != nil
	p.mu.Unlock()
	if file == "" || seeded || etcd == nil {
		return nil
	}
	s, err := etcdstate.CaptureCRDSeed(ctx, etcd, c)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return etcdstate.WriteWhole(file, raw)
}
