#!/usr/bin/env bash
# Renders deploy/k8s (the base) and deploy/k8s/overlays/dev with `kubectl kustomize`, checks
# both against the Kubernetes schemas and Pagoda's rules (validate.mjs), and checks that the
# validator catches broken manifests (selftest.mjs). A ctest test runs it.
#   deploy/k8s/validate/validate.sh [WORK_DIR]   (node_modules are installed there once)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work"
for tool in kubectl node npm; do
  command -v "$tool" >/dev/null || { echo "validate: $tool is missing (tools/setup.sh installs it)" >&2; exit 1; }
done
cp "$here/package.json" "$here/package-lock.json" "$here/validate.mjs" "$here/selftest.mjs" "$work/"
if [ ! -d "$work/node_modules/kubernetes-models" ] ||
   ! cmp -s "$here/package-lock.json" "$work/node_modules/.package-lock.json.pagoda"; then
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$here/package-lock.json" "$work/node_modules/.package-lock.json.pagoda"
fi
kubectl kustomize "$here/.." > "$work/base.yaml" 2> >(grep -v "^# Warning: '.*' is deprecated" >&2)
kubectl kustomize "$here/../overlays/dev" > "$work/dev.yaml" 2> >(grep -v "^# Warning: '.*' is deprecated" >&2)
node "$work/validate.mjs" "$work/base.yaml" "$work/dev.yaml"
node "$work/selftest.mjs" "$work/base.yaml"
