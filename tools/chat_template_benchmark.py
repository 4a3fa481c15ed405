#!/usr/bin/env python3
"""How chat-template rendering scales with the number of messages (issue 23: it must be linear).

Renders conversations of N alternating user/assistant messages through `pagoda render-template`
with real templates from the shared golden set, best of --repeat runs, and prints the time per
render and per message. The time includes the process start and the JSON parse, which is what
a request pays on top of the render; a linear renderer keeps ms/1k messages flat as N grows.

Usage: tools/chat_template_benchmark.py [--pagoda build/bin/pagoda] [--sizes 1000,2000,...]
"""

import argparse
import json
import os
import subprocess
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATES = ["meta-llama-Llama-3.1-8B-Instruct", "Qwen-Qwen2.5-7B-Instruct"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pagoda", default=os.path.join(REPO, "build", "bin", "pagoda"))
    parser.add_argument("--shared", default=os.path.join(REPO, "..", "shared"))
    parser.add_argument("--sizes", default="1000,2000,4096,8192,32768,131072")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    golden = json.load(open(os.path.join(args.shared, "golden", "chat_templates.json"),
                            encoding="utf-8"))
    tmp = tempfile.mkdtemp()
    print(f"{'template':40} {'messages':>9} {'ms':>9} {'ms/1k msgs':>11}")
    for name in TEMPLATES:
        template_file = os.path.join(tmp, "t.jinja")
        with open(template_file, "w", encoding="utf-8") as f:
            f.write(golden["templates"][name])
        for n in (int(s) for s in args.sizes.split(",")):
            messages = [{"role": "user" if i % 2 == 0 else "assistant",
                         "content": f"message number {i} with some text"} for i in range(n)]
            context_file = os.path.join(tmp, "c.json")
            with open(context_file, "w", encoding="utf-8") as f:
                json.dump({"messages": messages, "tools": None, "documents": None,
                           "add_generation_prompt": True, "bos_token": "<|begin_of_text|>"}, f)
            best = float("inf")
            for _ in range(args.repeat):
                start = time.perf_counter()
                r = subprocess.run([args.pagoda, "render-template", "--template-file=" + template_file,
                                    "--context-file=" + context_file, "--now=2026-11-22T00:00:00"],
                                   capture_output=True)
                best = min(best, time.perf_counter() - start)
                if r.returncode != 0:
                    raise SystemExit(r.stderr.decode())
            print(f"{name:40} {n:>9} {best * 1000:>9.1f} {best * 1e6 / n:>11.2f}")


if __name__ == "__main__":
    main()
