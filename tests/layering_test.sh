#!/usr/bin/env bash
# Who may include whom (README's Layout; DESIGN §1), checked by grep over the #include lines:
#   - common/ includes nothing of lib/, router/, worker/, cli/, tools/ or tests/; lib/ includes
#     common/ and nothing of router/, worker/, cli/, tools/ or tests/;
#   - common/ is plain C++: no gRPC, protobuf or generated proto header (the step protocol's
#     wire form lives beside the protos, in proto/), except the credentials and tokens of the
#     ports between Pagoda's processes (common/process/grpc_security.*);
#   - in common/, cpp-httplib only in the process plumbing (common/process/);
#   - router/ and worker/ never include each other; the worker needs nothing of lib/ (no
#     tokenizer, template or grammar);
#     lib/text/ may include common/model/, never the other way;
#   - oneDNN only in worker/ (the router's binary does not load it);
#   - in router/ and worker/, gRPC and generated protos only in the transports: *_service.*,
#     *_client.* (a call's calling side), *_connection.* (one peer's side of a service's
#     call), *_main.cc, router_server.*, worker_server.* and
#     grpc_port_limits.cc (STYLE: the core is plain C++).
# Exits 1 listing every include that breaks a rule.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
# forbid DIRS REGEX WHY [ALLOWED_PATH_REGEX]: no #include matching REGEX in DIRS' sources.
forbid() {
  local dirs=$1 regex=$2 why=$3 allowed=${4:-}
  local hits
  hits=$(grep -rnE --include='*.h' --include='*.cc' "^#include [<\"]($regex)" $dirs |
         { if [ -n "$allowed" ]; then grep -vE "^($allowed):" ; else cat; fi; })
  if [ -n "$hits" ]; then
    echo "layering: $why:"
    echo "$hits" | sed 's/^/  /'
    status=1
  fi
}
forbid common 'lib/|router/|worker/|cli/|tools/|tests/' "common/ includes lib/ or a side of the split"
forbid lib 'router/|worker/|cli/|tools/|tests/' "lib/ includes a side of the split"
forbid lib 'grpcpp/|grpc/|google/protobuf/|pagoda/v1/' "lib/ includes gRPC or protobuf"
forbid common 'grpcpp/|grpc/|google/protobuf/|pagoda/v1/' "common/ includes gRPC or protobuf" \
  'common/process/grpc_security\.(h|cc)'
forbid common 'httplib\.h' "cpp-httplib outside common/process/" 'common/process/[^:]*'
forbid router 'worker/' "router/ includes worker/"
forbid worker 'router/' "worker/ includes router/"
forbid worker 'lib/' "worker/ includes lib/ (tokenizers, templates, grammars: it links only common/)"
forbid common/model 'lib/text/' "common/model/ includes lib/text/ (text/ may read model files; the worker links model/ alone)"
forbid "common lib router cli" 'oneapi/|dnnl' "oneDNN outside worker/ (only the worker links it)"
forbid "router worker" 'grpcpp/|grpc/|google/protobuf/|pagoda/v1/' \
  "gRPC or protobuf outside the transports" '[^:]*(_service\.(h|cc)|_client\.(h|cc)|_connection\.(h|cc)|_main\.cc|(router|worker)_server\.(h|cc)|grpc_port_limits\.cc)'
[ "$status" -eq 0 ] && echo "layering: every include follows the rules"
exit "$status"
