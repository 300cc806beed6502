#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh Debian machine. Idempotent.
#   - Debian: docker-registry (a real OCI registry), skopeo and umoci (independent image
#     clients), apache2-utils (htpasswd for the registry's basic auth), wrk (peer HTTP load
#     generator for the conversion webhook benchmark).
#   - Python venv at .venv with grpcio + grpcio-tools (an independent gRPC client) and
#     jsonschema (an independent schema validator).
set -euo pipefail
cd "$(dirname "$0")/../.."

# kubectl (with its built-in kustomize) renders config/ in tests and `make release`; it is not in
# Debian's archive, so it must come with the machine (the project's machines have it).
if ! command -v kubectl >/dev/null 2>&1; then
  echo "setup: kubectl is not installed; tests render config/ with \`kubectl kustomize\`" >&2
  echo "hint: install kubectl (v1.14+, it embeds kustomize) and re-run" >&2
  exit 1
fi

need_apt=()
for pkg_bin in docker-registry:docker-registry skopeo:skopeo umoci:umoci apache2-utils:htpasswd wrk:wrk; do
  pkg=${pkg_bin%%:*}; bin=${pkg_bin##*:}
  command -v "$bin" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv" >&2
  python3 -m venv .venv
fi
if ! .venv/bin/python -c 'import grpc, grpc_tools, grpc_health.v1.health_pb2, grpc_reflection.v1alpha.reflection_pb2, jsonschema, yaml' >/dev/null 2>&1; then
  echo "setup: installing Python test packages" >&2
  .venv/bin/pip install -q -r tests/python/requirements.txt
fi
echo "setup: ok" >&2
