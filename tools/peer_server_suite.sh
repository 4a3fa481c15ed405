#!/usr/bin/env bash
# An outside check of the OpenAI-compatible API: llama.cpp's own server tests (pytest, in
# tools/server/tests of its source) run against pagoda-router instead of llama-server. Their
# ServerProcess is patched to start a router with one spawned worker by Pagoda's flags
# (llama.cpp's --ctx-size becomes --max-model-len, --alias --served-model-name, --cors-origins
# --allowed-origins, ...), serving stories260K.gguf, the model their tinyllama2 preset uses.
# Prints pass/fail/skip counts per category (embeddings, CORS, response_format, /v1/responses,
# logit_bias, and the OpenAI-compatible files as a whole), then every failure's first line.
#
#   tools/peer_server_suite.sh BIN_DIR [LLAMA_CPP_DIR (default /tmp/llama.cpp)] [PYTEST ARGS]
#
# Needs python3 with pytest, requests, wget, numpy (Debian: python3-pytest python3-wget
# python3-numpy python3-requests). Without the openai Python SDK (not packaged in Debian 12),
# the tests that use it are skipped, named as such; tests/openai_sdk drives those paths with
# the official Node SDK. The suite is not committed here: unpack ../shared/peers'
# llama.cpp-src.tar.xz (or any llama.cpp checkout) and point LLAMA_CPP_DIR at it.
# Not a ctest: the peer's expectations are its own (its sampler's seeds, its extensions).
set -euo pipefail
bin=$(cd "$1" && pwd)
llama=${2:-/tmp/llama.cpp}
shift $(($# < 2 ? $# : 2))
here=$(cd "$(dirname "$0")/.." && pwd)
shared=${PAGODA_SHARED:-$here/../shared}
model=${PEER_MODEL:-$shared/models/stories260K-gguf/stories260K.gguf}
# The first python3 with pytest (a pyenv's may shadow Debian's).
python=
for p in ${PYTHON:-} python3 /usr/bin/python3; do
  if "$p" -c "import pytest" 2> /dev/null; then python=$p && break; fi
done
[ -n "$python" ] || { echo "error: no python3 with pytest (apt-get install python3-pytest)" >&2; exit 1; }
work=$(mktemp -d /tmp/peer-suite.XXXXXX)
cp -r "$llama/tools/server/tests/." "$work/"
mkdir -p "$work/templates"

# Chat templates by llama.cpp's names, from the golden set; anything else gets ChatML, the
# template llama-server falls back to when a model has none (stories260K has none).
"$python" - "$shared/golden/chat_templates.json" "$work/templates" << 'EOF'
import json, sys
templates = json.load(open(sys.argv[1]))["templates"]
for name, template in templates.items():
    open(f"{sys.argv[2]}/{name}.jinja", "w").write(template)
aliases = {"llama3": "meta-llama-Llama-3.1-8B-Instruct",
           "command-r": "CohereForAI-c4ai-command-r-plus-tool_use"}
for alias, name in aliases.items():
    open(f"{sys.argv[2]}/{alias}.jinja", "w").write(templates[name])
open(f"{sys.argv[2]}/chatml.jinja", "w").write(
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
EOF

cat > "$work/pagoda_peer.py" << 'EOF'
# pytest plugin: utils.ServerProcess starts pagoda-router (see tools/peer_server_suite.sh).
import os, socket, subprocess, sys, time
import utils

BIN, MODEL, TEMPLATES = (os.environ[k] for k in ("PEER_BIN", "PEER_MODEL", "PEER_TEMPLATES"))

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

def template_for(server):
    for name in (server.chat_template_file and os.path.basename(server.chat_template_file)
                 .removesuffix(".jinja"), server.chat_template):
        if name and os.path.exists(f"{TEMPLATES}/{name}.jinja"):
            return f"{TEMPLATES}/{name}.jinja"
    return f"{TEMPLATES}/chatml.jinja"

def start(self, timeout_seconds=utils.DEFAULT_HTTP_TIMEOUT):
    args = [f"{BIN}/pagoda-router", f"--host={self.server_host}",
            f"--http-port={self.server_port}", f"--port={free_port()}",
            f"--worker-port={free_port()}", f"--model={MODEL}", "--spawn-workers=1",
            "--worker-threads=1", "--worker-kv-cache-mb=16", "--shutdown-grace-s=0",
            f"--chat-template={template_for(self)}"]
    if self.n_ctx: args.append(f"--max-model-len={self.n_ctx}")
    if self.n_slots: args.append(f"--max-num-seqs={self.n_slots}")
    if self.model_alias: args.append(f"--served-model-name={self.model_alias}")
    if self.api_key: args.append(f"--api-key={self.api_key}")
    # llama-server answers every origin, with credentials, unless told otherwise; Pagoda's
    # CORS is off unless asked, so the same policy is asked for.
    args.append(f"--allowed-origins={self.cors_origins or '*'}")
    if not self.cors_origins: args.append("--allow-credentials")
    if self.pooling: args.append(f"--pooling={self.pooling}")
    print("tests: starting pagoda with:", " ".join(args))
    self.process = subprocess.Popen(args, stdout=sys.stdout, stderr=sys.stdout)
    self._log = sys.stdout
    utils.server_instances.add(self)
    start = time.time()
    while time.time() - start < timeout_seconds:
        try:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else None
            if self.make_request("GET", "/health", headers=headers).status_code == 200:
                self.ready = True
                return
        except Exception:
            pass
        if self.process.poll() is not None:
            raise RuntimeError(f"pagoda-router exited with {self.process.returncode}")
        time.sleep(0.1)
    raise TimeoutError(f"pagoda-router did not start within {timeout_seconds} s")

utils.ServerProcess.start = start

# OpenAI's routes without /v1 (a client whose base URL lacks it) are llama-server's aliases;
# Pagoda serves them under /v1 only, so the tests' calls are sent there. Each test's paths are
# kept: a test that calls llama.cpp's own endpoints (/completion, /props, ...) is reported
# apart from those that exercise the OpenAI-compatible API.
OPENAI = ("/chat/completions", "/completions", "/embeddings", "/responses", "/models")
# Neither OpenAI's nor the peer's own: liveness and metrics. (/tokenize is vLLM's and the
# peer's, with other fields: a test that calls it counts as the peer's own.)
ALSO_OURS = ("/health", "/metrics")
paths = []

def to_pagoda(path):
    route = path.split("?")[0]
    if route in OPENAI:
        path = "/v1" + path
    paths.append(path.split("?")[0])
    return path

for name in ("make_request", "make_stream_request"):
    def patched(self, method, path, *args, _original=getattr(utils.ServerProcess, name), **kw):
        return _original(self, method, to_pagoda(path), *args, **kw)
    setattr(utils.ServerProcess, name, patched)

import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    paths.clear()
    yield
    native = sorted({p for p in paths if not p.startswith("/v1/") and p not in ALSO_OURS})
    item.user_properties.append(("native", " ".join(native)))
EOF

# The openai Python SDK, when missing: a module whose client skips the test that makes one.
if ! "$python" -c "import openai" 2> /dev/null; then
  mkdir -p "$work/no_openai/openai"
  cat > "$work/no_openai/openai/__init__.py" << 'EOF'
import pytest

class OpenAI:
    def __init__(self, *args, **kwargs):
        pytest.skip("needs the openai Python SDK, which is not installed")

class OpenAIError(Exception):
    pass

APIError = BadRequestError = AuthenticationError = NotFoundError = OpenAIError
EOF
  export PYTHONPATH="$work/no_openai"
fi

# llama.cpp's tests talk to $PORT (8080 unless set): one nobody else holds.
PORT=${PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
export PORT
files=(unit/test_chat_completion.py unit/test_completion.py unit/test_embedding.py
  unit/test_security.py unit/test_compat_oai_responses.py)
cd "$work"
PEER_BIN=$bin PEER_MODEL=$model PEER_TEMPLATES=$work/templates PYTHONPATH="$work:${PYTHONPATH:-}" \
  "$python" -m pytest -p pagoda_peer -q -o cache_dir="$work/.cache" --junitxml="$work/junit.xml" \
  "${files[@]}" "$@" > "$work/pytest.log" 2>&1 || true

"$python" - "$work/junit.xml" << 'EOF'
import re, sys
import xml.etree.ElementTree as ET
cases = []
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    outcome, why = "pass", ""
    for tag in ("failure", "error", "skipped"):
        node = case.find(tag)
        if node is not None:
            outcome = {"failure": "fail", "error": "fail", "skipped": "skip"}[tag]
            why = (node.get("message") or "").strip().splitlines()[0:1]
            why = why[0][:160] if why else ""
    native = [p.get("value") for p in case.iter("property") if p.get("name") == "native"]
    if native and native[0]:
        outcome = "native-" + outcome  # calls llama.cpp's own endpoints
    cases.append((case.get("classname").split(".")[-1], case.get("name"), outcome, why))
categories = {
    "embeddings": lambda f, n: f == "test_embedding",
    "CORS": lambda f, n: "cors" in n,
    "response_format": lambda f, n: "response_format" in n or "json_schema" in n,
    "/v1/responses": lambda f, n: f == "test_compat_oai_responses",
    "logit_bias": lambda f, n: "logit_bias" in n,
    "OpenAI-compatible files": lambda f, n: True,
}
# "native": tests that call llama.cpp's own endpoints, counted apart (pass/fail there too).
print(f"{'category':26} {'pass':>5} {'fail':>5} {'skip':>5} {'native pass/fail':>17}")
for name, match in categories.items():
    picked = [c for c in cases if match(c[0], c[1])]
    count = lambda o: sum(1 for c in picked if c[2] == o)
    native = f"{count('native-pass')}/{count('native-fail')}"
    print(f"{name:26} {count('pass'):5} {count('fail'):5} {count('skip'):5} {native:>17}")
for title, outcome in (("failures", "fail"), ("failures calling llama.cpp's own endpoints",
                                                  "native-fail")):
    print(f"\n{title}:")
    for f, n, o, why in cases:
        if o == outcome:
            print(f"  {f}::{n}: {why}")
EOF
echo "log: $work/pytest.log"
