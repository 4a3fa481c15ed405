#!/usr/bin/env bash
# Who may include whom (README's Layout; DESIGN §1), checked by grep over the #include lines:
#   - common/ includes nothing of router/, worker/, cli/, tools/ or tests/;
#   - common/ is plain C++: no gRPC, protobuf or generated proto header (the step protocol's
#     wire form lives beside the protos, in proto/);
#   - in common/, cpp-httplib only in the process plumbing (common/process/);
#   - router/ and worker/ never include each other; the worker needs no tokenizer or template;
#     common/text/ may include common/model/, never the other way;
#   - oneDNN only in worker/ (the router's binary does not load it);
#   - in router/ and worker/, gRPC and generated protos only in the transports: *_service.*,
#     *_main.cc, router_server.* and grpc_port_limits.cc (STYLE: the core is plain C++).
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
forbid common 'router/|worker/|cli/|tools/|tests/' "common/ includes a side of the split"
forbid common 'grpcpp/|grpc/|google/protobuf/|pagoda/v1/' "common/ includes gRPC or protobuf"
forbid common 'httplib\.h' "cpp-httplib outside common/process/" 'common/process/[^:]*'
forbid router 'worker/' "router/ includes worker/"
forbid worker 'router/' "worker/ includes router/"
forbid worker 'common/text/|common/jinja/' "worker/ includes tokenizers or templates (it links only model/)"
forbid common/model 'common/text/' "common/model/ includes common/text/ (text/ may read model files; the worker links model/ alone)"
forbid "common router cli" 'oneapi/|dnnl' "oneDNN outside worker/ (only the worker links it)"
forbid "router worker" 'grpcpp/|grpc/|google/protobuf/|pagoda/v1/' \
  "gRPC or protobuf outside the transports" '[^:]*(_service\.(h|cc)|_main\.cc|router_server\.(h|cc)|grpc_port_limits\.cc)'
[ "$status" -eq 0 ] && echo "layering: every include follows the rules"
exit "$status"
