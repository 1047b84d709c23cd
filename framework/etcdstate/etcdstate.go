// Package etcdstate is what the local provider stores in etcd directly, around its API servers:
// CRD seeds (the CRDs as an API server of one build stored them, written under a new cluster's
// prefix before its API server starts) and workload snapshots (a cluster's scale workloads as
// stored, restored the same way), with their file formats.
package etcdstate

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/hostetcd"
	"github.com/ambientmc/ambientmc/framework/kube/apply"
)

// A CRD seed is the CRDs exactly as an API server of this build stored them in etcd (created
// through the API, validated, defaulted and Established), captured once and kept beside the
// binary. Later runs write it under each new cluster's prefix before its API server starts, so
// the API server comes up serving every CRD instead of validating ~28 large schemas per cluster.
// Each copy gets its own uid; creation timestamps are the seed's.

// SeedFormat changes whenever what a seed holds or how it is written changes (2: slimmed CRDs).
const SeedFormat = "2"

// CRDSeed is a seed file.
type CRDSeed struct {
	Entries []SeedEntry `json:"entries"`
}

// SeedEntry is one stored CRD: its etcd key below the cluster prefix, its uid and its bytes.
type SeedEntry struct {
	Key   string `json:"key"`
	UID   string `json:"uid"`
	Value []byte `json:"value"`
}

// CRDKeyPrefix is where an API server stores CRDs, below its prefix.
const CRDKeyPrefix = "/apiextensions.k8s.io/customresourcedefinitions/"

// WriteSeed stores the seed under prefix, each CRD with a fresh uid.
func WriteSeed(ctx context.Context, e *hostetcd.Etcd, s *CRDSeed, prefix string) error {
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

// CaptureCRDSeed reads c's CRDs as its API server stored them under its prefix, each with the uid
// the API gave it (which a later WriteSeed replaces).
func CaptureCRDSeed(ctx context.Context, etcd *hostetcd.Etcd, c *cluster.Cluster) (*CRDSeed, error) {
	list, err := c.Dynamic.Resource(apply.CRDs).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	uids := map[string]string{}
	for _, o := range list.Items {
		uids[o.GetName()] = string(o.GetUID())
	}
	prefix := hostetcd.Prefix(c.Name)
	kvs, err := etcd.RangePrefix(ctx, prefix+CRDKeyPrefix)
	if err != nil {
		return nil, err
	}
	var s CRDSeed
	for _, x := range kvs {
		key := strings.TrimPrefix(string(x.Key), prefix)
		uid := uids[strings.TrimPrefix(key, CRDKeyPrefix)]
		if uid == "" || bytes.Count(x.Value, []byte(uid)) != 1 {
			return nil, fmt.Errorf("CRD seed: %s has no unique uid in its stored bytes", key)
		}
		s.Entries = append(s.Entries, SeedEntry{Key: key, UID: uid, Value: x.Value})
	}
	return &s, nil
}

// WriteWhole writes data to a temporary file beside file and renames it into place, so a
// parallel run never reads half of it.
func WriteWhole(file string, data []byte) error {
	tmp := fmt.Sprintf("%s.%s.tmp", file, rand.Text()[:8])
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// Only is s with the CRDs named (plural.group) alone.
func (s *CRDSeed) Only(names []string) *CRDSeed {
	out := &CRDSeed{}
	for _, en := range s.Entries {
		if slices.Contains(names, strings.TrimPrefix(en.Key, CRDKeyPrefix)) {
			out.Entries = append(out.Entries, en)
		}
	}
	return out
}
