#!/usr/bin/env bash
# Runs every reproducer against an istio.io/istio version.
#
#   ./run.sh                                         # the version pinned in go.mod
#   ./run.sh v0.0.0-20260826214018-9739e10eb9d7      # release-1.30 of 2026-08-26
#
# The module is copied to a temporary directory, its requirements replaced by istio.io/istio at the
# version (with the project's reviewed wrapper ../scripts/istiod/<version>/go.mod when there is one,
# which replaces pins the module proxy no longer serves) and tidied there, so this directory's
# go.mod and go.sum are left as they are. Each reproducer is
# a test that fails while the fault is present. istiod's logs are dropped from the output unless
# REPRO_LOGS=1; extra arguments after the version go to every `go test` (e.g. -v). REPRO_ONLY=<folder>
# runs one reproducer, e.g. to pass it its own flags:
#
#   REPRO_ONLY=inplace-rotation-race ./run.sh "" -all -rotations=30
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
version=${1:-}
shift || true
reproducers=(
  syncstatus-closed-after-rotation
  inplace-rotation-race
  removed-cluster-held-by-sync-timers
  deletion-midsync-head-of-line
)

if [ -n "${REPRO_ONLY:-}" ]; then
  reproducers=("$REPRO_ONLY")
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$here/go.mod" "$here/go.sum" "$tmp/"
for r in "${reproducers[@]}"; do
  cp -r "$here/$r" "$tmp/"
done
cd "$tmp"
if [ -n "$version" ]; then
  wrapper="$here/../scripts/istiod/$version"
  if [ -f "$wrapper/go.mod" ]; then
    # The project's reviewed wrapper for that version (docs/istiod-under-test.md): istio at that
    # version with its own pins, and replace directives for pins the module proxy no longer serves.
    sed 's|^module .*|module github.com/ambientmc/ambientmc/repro|' "$wrapper/go.mod" > go.mod
    cp "$wrapper/go.sum" go.sum
    echo "using scripts/istiod/$version/go.mod (its replace directives: $(grep -c '=>' go.mod))"
  else
    # Require only istio at that version, so that tidy takes the versions of its dependencies
    # (client-go and the rest) from that istio's go.mod rather than keeping the pinned ones.
    go_version=$(sed -n 's/^go //p' go.mod)
    printf 'module github.com/ambientmc/ambientmc/repro\n\ngo %s\n\nrequire istio.io/istio %s\n' \
      "$go_version" "$version" > go.mod
  fi
fi
# -e: tidy also resolves the tests of istio's own packages, and some of their modules are no longer
# served by the module proxy (e.g. github.com/agentgateway/agentgateway/api at release-1.30's version);
# the reproducers do not need them.
go mod tidy -e
echo "istio.io/istio $(go list -m -f '{{.Version}}' istio.io/istio)"

status=0
for r in "${reproducers[@]}"; do
  start=$(date +%s)
  set +e
  out=$(cd "$r" && go test -count=1 "$@" . 2>&1)
  rc=$?
  set -e
  if [ "${REPRO_LOGS:-}" != 1 ]; then
    # istiod's log lines start with an RFC 3339 timestamp.
    out=$(printf '%s\n' "$out" | grep -Ev '^[0-9]{4}-[0-9]{2}-[0-9]{2}T' || true)
  fi
  printf '%s\n' "$out"
  if [ $rc -eq 0 ]; then
    verdict="passes: not reproduced"
  elif printf '%s\n' "$out" | grep -q -- '^--- FAIL'; then
    verdict="FAILS: reproduced"
    if [ $status -eq 0 ]; then status=1; fi
  else
    verdict="does not build or run (exit $rc)"
    status=2
  fi
  echo "== $r: $verdict ($(( $(date +%s) - start ))s with the build)"
done
# 0: nothing reproduced; 1: a fault reproduced; 2: a reproducer did not build or run.
exit $status
