#!/usr/bin/env bash
# Renders deploy/k8s (the base), deploy/k8s/overlays/dev, deploy/k8s/overlays/prometheus-keda
# and the pipeline stage overlays (deploy/k8s/overlays/stage-group-{lws,statefulset}-{2,3}) with
# `kubectl kustomize`, checks each against the Kubernetes schemas (and the ServiceMonitor,
# ScaledObject and LeaderWorkerSet CRDs) and Pagoda's rules (validate.mjs: for stage groups,
# every stage pod started as the kubelet would start it gets --layers and --kv-transfer-port,
# and the ranges tile the model), and checks that the validator catches broken manifests
# (selftest.mjs); renders deploy/grafana and checks the dashboard's ConfigMap and PromQL
# (dashboard.mjs). A ctest test runs it.
#   deploy/k8s/validate/validate.sh [WORK_DIR]   (node_modules are installed there once)
# The manifests need kustomize v4.1+ (kubectl 1.21+); with an older kubectl, such as Debian 12's
# 1.20, it prints SKIPPED and exits 77 (ctest's SKIP_RETURN_CODE).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work"
for tool in kubectl node npm; do
  command -v "$tool" >/dev/null || { echo "validate: $tool is missing (tools/setup.sh installs it)" >&2; exit 1; }
done
minor=$(kubectl version --client -o json 2>/dev/null |
  node -e 'let s = ""; process.stdin.on("data", (d) => s += d).on("end", () =>
    console.log(parseInt(JSON.parse(s).clientVersion.minor) || 0))')
if [ "${minor:-0}" -lt 21 ]; then
  echo "validate: SKIPPED (kubectl 1.${minor:-?} embeds kustomize v2; the manifests need kubectl 1.21+)"
  exit 77
fi
cp "$here/package.json" "$here/package-lock.json" "$here/validate.mjs" "$here/selftest.mjs" \
  "$here/dashboard.mjs" "$here/leaderworkerset.schema.json" "$work/"
if [ ! -d "$work/node_modules/kubernetes-models" ] ||
   ! cmp -s "$here/package-lock.json" "$work/node_modules/.package-lock.json.pagoda"; then
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$here/package-lock.json" "$work/node_modules/.package-lock.json.pagoda"
fi
kubectl kustomize "$here/.." > "$work/base.yaml"
kubectl kustomize "$here/../overlays/dev" > "$work/dev.yaml"
kubectl kustomize "$here/../overlays/prometheus-keda" > "$work/prometheus-keda.yaml"
# A model split over 2 and 3 machines, with each stage group component.
stages=()
for overlay in stage-group-lws-2 stage-group-lws-3 stage-group-statefulset-2 stage-group-statefulset-3; do
  kubectl kustomize "$here/../overlays/$overlay" > "$work/$overlay.yaml"
  stages+=("$work/$overlay.yaml")
done
node "$work/validate.mjs" "$work/base.yaml" "$work/dev.yaml" "$work/prometheus-keda.yaml" "${stages[@]}"
node "$work/selftest.mjs" "$work/prometheus-keda.yaml" "${stages[@]}"
# The Grafana dashboard's ConfigMap (generated from its JSON file) and its PromQL.
kubectl kustomize "$here/../../grafana" > "$work/grafana.yaml"
node "$work/dashboard.mjs" "$work/grafana.yaml" "$here/../../grafana/pagoda-dashboard.json"
