package nodeimages

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/ambientmc/ambientmc/framework/dockerhost"
	"github.com/ambientmc/ambientmc/framework/kindnode"
)

// Store is the images a run starts that only Docker's image store holds, saved once, when the
// first node wants them, into one archive in Dir.
type Store struct {
	Docker dockerhost.Docker
	Dir    string
	Log    io.Writer

	mu   sync.Mutex
	refs []string
	once sync.Once
	path string
	err  error
}

// Want records the images the run takes from Docker's image store (preflight finds them).
func (s *Store) Want(refs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refs = refs
}

// Wanted are the images Want recorded.
func (s *Store) Wanted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refs
}

// Archive saves the wanted images into one archive, once however many nodes ask, as `kind load
// docker-image` does; "" when none is wanted.
func (s *Store) Archive(ctx context.Context) (string, error) {
	refs := s.Wanted()
	if len(refs) == 0 {
		return "", nil
	}
	s.once.Do(func() {
		start := time.Now()
		path := filepath.Join(s.Dir, "images-from-docker.tar")
		if err := s.Docker.SaveImages(ctx, path, refs...); err != nil {
			s.err = fmt.Errorf("saving %s from Docker's image store: %w", strings.Join(refs, ", "), err)
			return
		}
		s.path = path
		fmt.Fprintf(s.Log, "ambientmc: kind: saved %d images of Docker's image store (%s) into %s in %.1fs\n",
			len(refs), strings.Join(refs, ", "), filepath.Base(path), time.Since(start).Seconds())
	})
	return s.path, s.err
}

// Remove removes the archive, after a save under way, and keeps any later Archive from saving one.
func (s *Store) Remove() {
	s.once.Do(func() {})
	if s.path != "" {
		_ = os.Remove(s.path)
	}
}

// Load imports archives into every node of cluster name, as `kind load image-archive` does
// (containerd's ctr import), logging each. Archives must be single-platform: the import runs with
// --all-platforms, which fails on multi-platform archives saved from Docker's containerd image
// store (kind#3795).
func Load(ctx context.Context, log io.Writer, name string, ns []nodes.Node, archives []string) error {
	for _, a := range archives {
		for _, n := range ns {
			if err := ctx.Err(); err != nil {
				return err
			}
			start := time.Now()
			if err := kindnode.LoadArchive(n, a); err != nil {
				return fmt.Errorf("loading %s into node %s: %w (save single-platform archives: docker image save --platform linux/amd64 -o FILE IMAGE)", a, n.String(), err)
			}
			fmt.Fprintf(log, "ambientmc: kind: %s: loaded %s into %s in %.1fs\n", name, filepath.Base(a), n.String(), time.Since(start).Seconds())
		}
	}
	return nil
}
