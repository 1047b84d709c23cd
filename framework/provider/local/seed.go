package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/hostetcd"
	"github.com/ambientmc/ambientmc/framework/kube/apply"
	"github.com/ambientmc/ambientmc/framework/mesh/crds"
)

// A CRD seed is the CRDs exactly as an API server of this build stored them in etcd (created
// through the API, validated, defaulted and Established), captured once and kept beside the
// binary. Later runs write it under each new cluster's prefix before its API server starts, so
// the API server comes up serving every CRD instead of validating ~28 large schemas per cluster.
// Each copy gets its own uid; creation timestamps are the seed's.

// seedFormat changes whenever what a seed holds or how it is written changes (2: slimmed CRDs).
const seedFormat = "2"

// crdSeed is the seed file.
type crdSeed struct {
	Entries []seedEntry `json:"entries"`
}

// seedEntry is one stored CRD: its etcd key below the cluster prefix, its uid and its bytes.
type seedEntry struct {
	Key   string `json:"key"`
	UID   string `json:"uid"`
	Value []byte `json:"value"`
}

const crdKeyPrefix = "/apiextensions.k8s.io/customresourcedefinitions/"

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
	seed *crdSeed
}

// findSeed picks the seed file for objs and loads it if a complete one exists.
func (p *Provider) findSeed(objs []*unstructured.Unstructured) (seedSlot, error) {
	h := sha256.New()
	h.Write([]byte(seedFormat))
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
	var s crdSeed
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
func (p *Provider) seedOf(watchedOnly bool) *crdSeed {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.seeds[watchedOnly].seed; s != nil {
		return s
	}
	return seedFor(p.seeds[false].seed, watchedOnly)
}

// writeSeed stores the seed under prefix, each CRD with a fresh uid.
func writeSeed(ctx context.Context, e *hostetcd.Etcd, s *crdSeed, prefix string) error {
	for _, en := range s.Entries {
		uid := string(uuid.NewUUID())
		if len(uid) != len(en.UID) || bytes.Count(en.Value, []byte(en.UID)) != 1 {
			return fmt.Errorf("CRD seed entry %s: uid %q not found exactly once", en.Key, en.UID)
		}
		if err := e.Put(ctx, prefix+en.Key, bytes.Replace(en.Value, []byte(en.UID), []byte(uid), 1)); err != nil {
			return err
		}
	}
	return nil
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
	list, err := c.Dynamic.Resource(apply.CRDs).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	uids := map[string]string{}
	for _, o := range list.Items {
		uids[o.GetName()] = string(o.GetUID())
	}
	prefix := hostetcd.Prefix(c.Name)
	kvs, err := etcd.RangePrefix(ctx, prefix+crdKeyPrefix)
	if err != nil {
		return err
	}
	var s crdSeed
	for _, x := range kvs {
		key := strings.TrimPrefix(string(x.Key), prefix)
		uid := uids[strings.TrimPrefix(key, crdKeyPrefix)]
		if uid == "" || bytes.Count(x.Value, []byte(uid)) != 1 {
			return fmt.Errorf("CRD seed: %s has no unique uid in its stored bytes", key)
		}
		s.Entries = append(s.Entries, seedEntry{Key: key, UID: uid, Value: x.Value})
	}
	raw, err := json.Marshal(&s)
	if err != nil {
		return err
	}
	return writeWhole(file, raw)
}

// writeWhole writes data to a temporary file beside file and renames it into place, so a
// parallel run never reads half of it.
func writeWhole(file string, data []byte) error {
	tmp := fmt.Sprintf("%s.%s.tmp", file, rand.Text()[:8])
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}
