package cluster

import "time"

// Facts describe a provider's run for the environment, the plan, the report and the logs: data,
// not operations. Provider.Facts returns them as they are when called: some are known from New,
// some only after Preflight (Platforms) or Create (StartWaves).
type Facts struct {
	// DataPlane says what carries traffic, one of the report's DataPlane* values: "emulated" (the
	// framework's emulation), "ztunnel" (Istio's) or "none". The provider implements
	// probe.Deployer exactly when it is not "none" (the registry's test holds every provider to it).
	DataPlane string
	// IstiodProcess says istiod runs as a pilot-discovery process on this host: -istiod.version or
	// -istiod.binary choose it, the environment builds it into the binary cache (framework/bins)
	// and StartIstiod gets it as IstiodOptions.Binary. Otherwise istiod runs from images.
	IstiodProcess bool
	// ClusterBinaries name what the clusters run besides pilot-discovery, from the same cache.
	ClusterBinaries []string
	// IstiodImageVersion is the istio.io/istio version of the Istio images where make images built
	// them, so the report and the known-issue table name the istiod under test ("" otherwise).
	IstiodImageVersion string
	// IstioImages says Istio's components run as pods from images, whose image and digest the
	// report reads from the clusters.
	IstioImages bool
	// NodeImage is the image every cluster's node runs ("" where there are no node containers).
	NodeImage string
	// Platforms are the Istio platform each cluster is installed with and what chose it, by
	// cluster (known after Preflight; nil where none applies).
	Platforms map[string]Platform
	// OnLoopback says every process of the run runs on this host and listens on loopback only,
	// so traffic must stay there: the environment watches every connection (local).
	OnLoopback bool
	// ReadyEarly says Create hands over each cluster as soon as it is ready, through the
	// provider's Env.OnReady, while later ones start (local's waves).
	ReadyEarly bool
	// SetupEstimates say how long Create and the CRDs will take for the run's topology (items named
	// after the setup steps "clusters" and "crds"); nil: no estimate.
	SetupEstimates []SetupEstimate
	// StartWaves are the groups the last Create started clusters in, in order.
	StartWaves []StartWave
	// WatchedOnlyCuts list what the provider leaves out of clusters an istiod only watches
	// (provider.Env.IstiodClusters); nil where it builds them as the others.
	WatchedOnlyCuts []string
}

// Platform is the Istio platform a cluster is installed with and what chose it.
type Platform struct{ Name, From string }

// SetupEstimate is how long one setup step is expected to take, and what the figure is made of.
type SetupEstimate struct {
	Step     string
	Expected time.Duration
	Detail   string
}

// StartWave is one group of clusters that started together: when it began and when its last
// cluster was ready, counted from the start of Create's first wave.
type StartWave struct {
	Clusters       []string
	Start, Ready   time.Duration
	ClusterSeconds []float64 // each cluster's own start-to-ready seconds, in Clusters order
}
