"""One request of the soak, over HTTP (the OpenAI API, streamed or not, or aborted mid-stream)
or gRPC (`pagoda generate --json`, the repository's own gRPC client), reduced to what must not
change between runs: the texts, tool calls, finish reasons, token ids, prompt logprobs and
embeddings (random tool-call ids and timestamps left out)."""
import http.client
import json
import subprocess
import time


class Outcome:
    def __init__(self, ok, result=None, error=None, ttft=None, aborted=False):
        self.ok = ok  # a complete answer (or an abort we asked for)
        self.result = result  # the reduced answer, for comparing with the reference
        self.error = error  # why not ok
        self.ttft = ttft  # seconds to the first streamed token, when streamed
        self.aborted = aborted


FINISHED = {"stop", "length", "tool_calls"}


def run(spec, port, grpc_port, bin_dir, timeout):
    try:
        if spec["api"] == "grpc":
            return _grpc(spec, grpc_port, bin_dir, timeout)
        if spec.get("stream"):
            return _stream(spec, port, timeout)
        return _post(spec, port, timeout)
    except (OSError, http.client.HTTPException, ValueError) as e:
        return Outcome(False, error=f"{type(e).__name__}: {e}")


def _post(spec, port, timeout):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("POST", spec["path"], json.dumps(spec["body"]),
                           {"Content-Type": "application/json"})
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    if response.status != 200:
        return Outcome(False, error=f"HTTP {response.status}: {body[:300]!r}")
    answer = json.loads(body)
    if spec["path"] == "/v1/embeddings":
        return Outcome(True, {"embeddings": [d["embedding"] for d in answer["data"]],
                              "prompt_tokens": answer["usage"]["prompt_tokens"]})
    choices = []
    for c in sorted(answer["choices"], key=lambda c: c["index"]):
        if c.get("finish_reason") not in FINISHED:
            return Outcome(False, error=f"finish_reason {c.get('finish_reason')!r}")
        if "message" in c:
            m = c["message"]
            calls = [(t["function"]["name"], t["function"]["arguments"])
                     for t in m.get("tool_calls") or []]
            choices.append({"content": m.get("content"), "tool_calls": calls,
                            "finish_reason": c["finish_reason"],
                            "prompt_logprobs": answer.get("prompt_logprobs")})
        else:
            choices.append({"text": c["text"], "finish_reason": c["finish_reason"],
                            "prompt_logprobs": c.get("prompt_logprobs")})
    return Outcome(True, {"choices": choices,
                          "completion_tokens": answer["usage"]["completion_tokens"]})


def _events(response):
    """The data payloads of a server-sent event stream."""
    while True:
        line = response.readline()
        if not line:
            return
        line = line.strip()
        if line.startswith(b"data:"):
            yield line[5:].strip().decode()


def _stream(spec, port, timeout):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    start = time.monotonic()
    ttft = None
    texts, calls, finish = {}, {}, {}
    try:
        connection.request("POST", spec["path"], json.dumps(spec["body"]),
                           {"Content-Type": "application/json"})
        response = connection.getresponse()
        if response.status != 200:
            return Outcome(False, error=f"HTTP {response.status}: {response.read()[:300]!r}")
        events = 0
        done = False
        for data in _events(response):
            if data == "[DONE]":
                done = True
                break
            chunk = json.loads(data)
            if "error" in chunk:
                return Outcome(False, error=f"stream error {chunk['error']}")
            for c in chunk.get("choices", []):
                i = c["index"]
                piece = c.get("text") if "text" in c else (c.get("delta") or {}).get("content")
                delta_calls = (c.get("delta") or {}).get("tool_calls") or []
                if (piece or delta_calls) and ttft is None:
                    ttft = time.monotonic() - start
                if piece:
                    texts[i] = texts.get(i, "") + piece
                for t in delta_calls:
                    call = calls.setdefault(i, {}).setdefault(t["index"], ["", ""])
                    f = t.get("function") or {}
                    call[0] += f.get("name") or ""
                    call[1] += f.get("arguments") or ""
                if c.get("finish_reason"):
                    finish[i] = c["finish_reason"]
            events += 1
            if spec.get("abort_after") and events >= spec["abort_after"]:
                return Outcome(True, ttft=ttft, aborted=True)  # closing the socket aborts
    finally:
        connection.close()
    if not done:
        return Outcome(False, error="stream ended without [DONE]", ttft=ttft)
    n = spec["body"].get("n", 1)
    choices = []
    for i in range(n):
        if finish.get(i) not in FINISHED:
            return Outcome(False, error=f"choice {i} finish_reason {finish.get(i)!r}", ttft=ttft)
        choices.append({"text": texts.get(i, ""), "finish_reason": finish[i],
                        "tool_calls": [tuple(v) for _, v in sorted(calls.get(i, {}).items())]})
    return Outcome(True, {"choices": choices}, ttft=ttft)


def _grpc(spec, grpc_port, bin_dir, timeout):
    b = spec["body"]
    command = [f"{bin_dir}/pagoda", "generate", f"--server=127.0.0.1:{grpc_port}",
               f"--prompt={b['prompt']}", f"--max_tokens={b['max_tokens']}",
               f"--temperature={b['temperature']}", f"--n={b.get('n', 1)}", "--json",
               f"--timeout={timeout}"]
    if "seed" in b:
        command.append(f"--seed={b['seed']}")
    done = subprocess.run(command, capture_output=True, timeout=timeout + 10)
    if done.returncode != 0:
        return Outcome(False, error=f"pagoda generate exit {done.returncode}: "
                                    f"{done.stderr.decode()[-300:]}")
    outputs = [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]
    choices = []
    for o in outputs:
        if o.get("finish_reason") not in FINISHED:
            return Outcome(False, error=f"finish_reason {o.get('finish_reason')!r}")
        choices.append({"text": o["text"], "output_ids": o["output_ids"],
                        "finish_reason": o["finish_reason"]})
    return Outcome(True, {"choices": choices})


def same(a, b, tolerance=1e-3):
    """Equal, floats within `tolerance` (a step's batch changes the sums' order); None when
    equal, else where they first differ."""
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) <= tolerance:
            return None
        return f"{a!r} != {b!r}"
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"keys {sorted(a)} != {sorted(b)}"
        for k in a:
            d = same(a[k], b[k], tolerance)
            if d:
                return f"{k}: {d}"
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return f"length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = same(x, y, tolerance)
            if d:
                return f"[{i}] {d}"
        return None
    return None if a == b else f"{str(a)[:120]!r} != {str(b)[:120]!r}"
