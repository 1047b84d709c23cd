#!/usr/bin/env bash
# kind-e2e.sh runs the multicluster suites on real kind clusters with real Istio images from a
# registry (istiod, ztunnel, istio-cni, east-west gateways with MetalLB addresses, fortio pods); with
# no ISTIO_HUB/ISTIO_TAG, with the images make images built (istiod only). It needs a Linux host
# with a reachable Docker (make engine); it refuses to start without one.
#
#   ISTIO_HUB=registry.istio.io/testing ISTIO_TAG=1.31-dev scripts/kind-e2e.sh        # 2 clusters
#   ISTIO_HUB=registry.istio.io/testing ISTIO_TAG=1.31-dev scripts/kind-e2e.sh 10     # 10 clusters
#
# Optional: ISTIO_VARIANT (e.g. distroless), KIND_IMAGE (node image; default the one make images
# built), KIND_LOAD (comma-separated single-platform image archives loaded into every
# node), KIND_PARALLEL (clusters created at once, default 3), TIMEOUT (go test -timeout), EXTRA
# (more go test flags, e.g. "-run TestLatency -keep").
#
# What it prints: the host checks below, then go test -v of ./suites/multicluster: the kind
# preflight lines, one "kind: cluster-i: creating ..." and "... ready in Ns" line per cluster,
# "MetalLB pool ... ready", the kube preflight, the install of each component, the suites, and the
# report directory (report.json with provider: kind, dataPlane, nodeImage). Every cluster
# is deleted at the end ("kind: deleted ambientmc-cluster-i"), also on failure, timeout and Ctrl-C;
# with EXTRA=-keep they stay and the script prints the `kind delete cluster --name ...` commands.
set -euo pipefail

cd "$(dirname "$0")/.."
CLUSTERS="${1:-2}"
ISTIO_HUB="${ISTIO_HUB:-}"
ISTIO_TAG="${ISTIO_TAG:-}"
ISTIO_VARIANT="${ISTIO_VARIANT:-}"
KIND_PARALLEL="${KIND_PARALLEL:-3}"
if [[ "${CLUSTERS}" -ge 10 ]]; then TIMEOUT="${TIMEOUT:-90m}"; else TIMEOUT="${TIMEOUT:-40m}"; fi
OUT="${PWD}/_output/kind-e2e"

say() { echo "kind-e2e: $*"; }
die() { echo "kind-e2e: $*" >&2; exit 1; }

# 1. Docker must answer: kind creates every node by running the docker CLI.
command -v docker >/dev/null || die "the docker CLI is not on PATH: install Docker (https://docs.docker.com/engine/install/); kind needs it"
if ! server="$(docker version --format '{{.Server.Version}}' 2>&1)"; then
  die "the Docker daemon is not reachable ($(grep -v '^$' <<<"${server}" | tail -n 1)): start it (sudo systemctl start docker) or set DOCKER_HOST"
fi
say "docker: server ${server}"

# 2. Host limits. inotify is not namespaced: every node shares this user's budget (kind's known
# issue "too many open files"; the 4th cluster fails at Ubuntu's default of 128 instances).
inst="$(cat /proc/sys/fs/inotify/max_user_instances)"
watches="$(cat /proc/sys/fs/inotify/max_user_watches)"
need_inst=$((40 * CLUSTERS)); need_watches=$((8192 * CLUSTERS))
if (( inst < need_inst || watches < need_watches )); then
  die "inotify: max_user_instances=${inst}, max_user_watches=${watches}; ${CLUSTERS} clusters need about ${need_inst} and ${need_watches}: sudo sysctl fs.inotify.max_user_instances=$(( need_inst > 512 ? need_inst : 512 )) fs.inotify.max_user_watches=$(( need_watches > 524288 ? need_watches : 524288 ))"
fi
say "inotify: max_user_instances=${inst}, max_user_watches=${watches} (enough for ${CLUSTERS})"
avail_kb="$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)"
need_kb=$((CLUSTERS * 1536 * 1024))
(( avail_kb >= need_kb )) || die "memory: ${CLUSTERS} clusters need about $((need_kb / 1024 / 1024)) GiB free, $((avail_kb / 1024 / 1024)) GiB available"
say "memory: $((avail_kb / 1024 / 1024)) GiB available, ${CLUSTERS} clusters need about $((need_kb / 1024 / 1024)) GiB"
if [[ "$(uname -s)" != Linux ]]; then
  say "warning: the framework reaches each API server at its node container IP (as Istio's CI does); Docker Desktop does not route those to the host"
fi

# 3. The suites.
test_flags=(-provider=kind -clusters="${CLUSTERS}" -istio.hub="${ISTIO_HUB}" -istio.tag="${ISTIO_TAG}" -istio.variant="${ISTIO_VARIANT}"
  -kind.parallel="${KIND_PARALLEL}" -report-dir="${OUT}/report")
[[ -n "${KIND_IMAGE:-}" ]] && test_flags+=(-kind.image="${KIND_IMAGE}")
[[ -n "${KIND_LOAD:-}" ]] && test_flags+=(-kind.load="${KIND_LOAD}")
say "go test ./suites/multicluster ${test_flags[*]} -timeout=${TIMEOUT} -v ${EXTRA:-}"
# shellcheck disable=SC2086
go test -count=1 -v -timeout="${TIMEOUT}" ./suites/multicluster "${test_flags[@]}" ${EXTRA:-}
say "report: ${OUT}/report/report.md"
