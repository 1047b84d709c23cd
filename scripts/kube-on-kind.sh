#!/usr/bin/env bash
# kube-on-kind.sh runs the suites through the kube provider against kind clusters that exist before
# the run, as a user with existing clusters would: scripts/kindup creates them (the node image of
# make images, MetalLB, nothing of Istio) and writes a topology file naming their kubeconfigs; the
# suites install istiod themselves and remove what they created; kindup deletes the clusters when
# this script ends, whatever happened.
#
#   scripts/kube-on-kind.sh [CLUSTERS] [go test flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
CLUSTERS="${1:-2}"; shift || true
OUT="${KUBE_ON_KIND_DIR:-${PWD}/_output/kube-on-kind}"
REPORT_DIR="${REPORT_DIR:-${OUT}/report}"
rm -rf "${OUT}/clusters"; mkdir -p "${OUT}/clusters"
go build -o "${OUT}/kindup" ./scripts/kindup
"${OUT}/kindup" -clusters="${CLUSTERS}" -out "${OUT}/clusters" &
kindup=$!
stop() { kill -TERM "${kindup}" 2>/dev/null || true; wait "${kindup}" 2>/dev/null || true; }
trap stop EXIT
topo="${OUT}/clusters/topology.yaml"
for _ in $(seq 1 600); do
  [[ -f "${topo}" ]] && break
  kill -0 "${kindup}" 2>/dev/null || { echo "kube-on-kind: kindup failed before its clusters were ready" >&2; exit 1; }
  sleep 0.5
done
[[ -f "${topo}" ]] || { echo "kube-on-kind: no clusters after 5 minutes" >&2; exit 1; }
echo "kube-on-kind: go test ./suites/multicluster -provider=kube -topology=${topo} $*"
go test -count=1 -v -timeout=30m ./suites/multicluster -provider=kube -topology="${topo}" -report-dir="${REPORT_DIR}" "$@"
