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
	"github.com/ambientmc/ambientmc/framework/kube/apply"
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
// same CRDs slimmed (slimCRDs). If a seed of exactly those exists for this kube-apiserver build,
// Create stores it in each cluster before the API server starts; otherwise SaveCRDSeed captures
// one after the CRDs were created through the API.
func (p *Provider) PreloadCRDs(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	if p.paths == nil {
		return nil, fmt.Errorf("local provider: Preflight must run before PreloadCRDs")
	}
	objs = slimCRDs(objs)
	return objs, p.findSeed(objs)
}

// findSeed picks the seed file for objs and loads it if a complete one exists.
func (p *Provider) findSeed(objs []*unstructured.Unstructured) error {
	h := sha256.New()
	h.Write([]byte(seedFormat))
	for _, o := range objs {
		raw, err := json.Marshal(o.Object)
		if err != nil {
			return err
		}
		h.Write(raw)
	}
	p.mu.Lock()
	dir := p.seedDir
	if dir == "" {
		dir = filepath.Dir(p.paths[bins.KubeAPIServer])
	}
	file := filepath.Join(dir, "crd-seed-"+hex.EncodeToString(h.Sum(nil))[:16]+".json")
	defer p.mu.Unlock()
	p.seedFile, p.seed = file, nil
	raw, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var s crdSeed
	if err := json.Unmarshal(raw, &s); err != nil || len(s.Entries) != len(objs) {
		// A damaged or partial seed is rebuilt, never used.
		return os.Remove(file)
	}
	p.seed = &s
	return nil
}

// SeededCRDs says whether Create stored the CRDs from a seed.
func (p *Provider) SeededCRDs() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seed != nil
}

// writeSeed stores the seed under prefix, each CRD with a fresh uid.
func (e *sharedEtcd) writeSeed(ctx context.Context, s *crdSeed, prefix string) error {
	for _, en := range s.Entries {
		uid := string(uuid.NewUUID())
		if len(uid) != len(en.UID) || bytes.Count(en.Value, []byte(en.UID)) != 1 {
			return fmt.Errorf("CRD seed entry %s: uid %q not found exactly once", en.Key, en.UID)
		}
		if err := e.put(ctx, prefix+en.Key, bytes.Replace(en.Value, []byte(en.UID), []byte(uid), 1)); err != nil {
			return err
		}
	}
	return nil
}

// SaveCRDSeed captures c's CRDs (created through its API and Established) as the seed for later
// runs, unless this run started from one.
func (p *Provider) SaveCRDSeed(ctx context.Context, c *cluster.Cluster) error {
	p.mu.Lock()
	file, seeded, etcd := p.seedFile, p.seed != nil, p.etcd
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
	prefix := etcdPrefix(c.Name)
	kvs, err := etcd.rangePrefix(ctx, prefix+crdKeyPrefix)
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
