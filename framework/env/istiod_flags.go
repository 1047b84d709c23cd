package env

import (
	"context"
	"flag"
	"fmt"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/report"
)

// IstiodFlags choose the istiod under test; both empty is the istio.io/istio the main go.mod pins.
type IstiodFlags struct {
	Version string // -istiod.version: an istio.io/istio module version to build pilot-discovery from
	Binary  string // -istiod.binary: a pilot-discovery to run as it is
}

// Registered next to the other suite flags (flags.go), on the same flag set.
var _ = registerIstiod(flag.CommandLine, &flags.Istiod)

func registerIstiod(fs *flag.FlagSet, f *IstiodFlags) *IstiodFlags {
	fs.StringVar(&f.Version, "istiod.version", "", "istio.io/istio module version to build pilot-discovery from (default: the version go.mod pins); e.g. v0.0.0-20260826214018-9739e10eb9d7")
	fs.StringVar(&f.Binary, "istiod.binary", "", "a pilot-discovery binary to run as it is, instead of building one (excludes -istiod.version)")
	return f
}

// Spec is the bins request the flags make.
func (f IstiodFlags) Spec() bins.IstiodSpec {
	return bins.IstiodSpec{Version: f.Version, Binary: f.Binary}
}

// validate is the check without side effects: the two flags exclude each other.
func (f IstiodFlags) validate() error {
	if f.Version != "" && f.Binary != "" {
		return fmt.Errorf("-istiod.version=%s and -istiod.binary=%s: give one of them (a version to build, or a pilot-discovery to run)", f.Version, f.Binary)
	}
	return nil
}

// validateFor adds that only providers running pilot-discovery as a process take one.
func (f IstiodFlags) validateFor(p cluster.Provider) error {
	if err := f.validate(); err != nil {
		return err
	}
	if !p.Facts().IstiodProcess && (f.Version != "" || f.Binary != "") {
		return fmt.Errorf("-istiod.version/-istiod.binary with -provider=%s: they choose the pilot-discovery of providers that run istiod as a process, and %s runs istiod images; drop them", p.Name(), p.Name())
	}
	return nil
}

// IstiodPath is the pilot-discovery to run; "" lets the provider choose (istiod images).
func (e *Env) IstiodPath() string {
	if e.Istiod == nil {
		return ""
	}
	return e.Istiod.Path
}

// CheckIstiod runs before anything starts: the module proxy must serve the version, the binary
// must run as pilot-discovery. The error names the flag and the fix.
func CheckIstiod(ctx context.Context, f IstiodFlags) error {
	if err := f.validate(); err != nil {
		return err
	}
	cache, err := bins.Default()
	if err != nil {
		return err
	}
	if err := cache.CheckIstiod(ctx, f.Spec()); err != nil {
		return f.flagError(err)
	}
	return nil
}

func (f IstiodFlags) flagError(err error) error {
	switch {
	case f.Binary != "":
		return fmt.Errorf("-istiod.binary=%s: %w", f.Binary, err)
	case f.Version != "":
		return fmt.Errorf("-istiod.version=%s: %w", f.Version, err)
	}
	return fmt.Errorf("istiod (the pinned default): %w", err)
}

// ResolveIstiod returns the pilot-discovery the flags choose, building it into the binary cache
// first if needed (the run's plan holds the cold build, and refused a -timeout too short for it).
func ResolveIstiod(ctx context.Context, f IstiodFlags) (*bins.IstiodBuild, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	cache, err := bins.Default()
	if err != nil {
		return nil, err
	}
	b, err := cache.Istiod(ctx, f.Spec())
	if err != nil {
		return nil, f.flagError(err)
	}
	return b, nil
}

// resolveIstiod is the setup step that picks the istiod before any cluster starts (its CRDs are
// that version's own) and records it in the report.
func resolveIstiod(ctx context.Context, e *Env) error {
	flags := e.Flags.Istiod
	if f := e.Provider.Facts(); !f.IstiodProcess {
		if f.IstiodImageVersion == "" {
			return nil // istiod images of unknown build
		}
		// The images make images built: their pilot-discovery is this version's build.
		flags = IstiodFlags{Version: f.IstiodImageVersion}
	}
	b, err := ResolveIstiod(ctx, flags)
	if err != nil {
		return err
	}
	e.Istiod = b
	e.Report.Istiod = &report.IstiodBuild{Version: b.ModuleVersion, Binary: b.Path, SHA256: b.SHA256, VersionOutput: b.VersionOutput,
		ReplacedPins: b.ReplacedPins, GoVersion: b.GoVersion}
	e.Logf("istiod: %s (%s)", b.Path, b.VersionOutput)
	return nil
}
