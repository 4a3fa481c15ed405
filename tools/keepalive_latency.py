#!/usr/bin/env python3
"""keepalive_latency: sequential requests on one keep-alive HTTP connection, for their latency.

Sends --requests requests one after another on a single connection (as the OpenAI SDKs keep
theirs) and prints the median, p90 and max latency of all but the first. Nagle's algorithm on
the server's socket holds a reply's second piece for the client's delayed ACK (~40 ms).

  tools/keepalive_latency.py --port=8000 [--path=/v1/models] [--requests=100] [--api-key=K]
  tools/keepalive_latency.py --port=8000 --path=/v1/completions \
      --body='{"prompt": "Once", "max_tokens": 1}'
"""
import argparse
import http.client
import statistics
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--path", default="/v1/models")
    p.add_argument("--body", default="", help="POST this JSON body (GET when empty)")
    p.add_argument("--requests", type=int, default=100)
    p.add_argument("--api-key", default="")
    a = p.parse_args()
    headers = {"Content-Type": "application/json"}
    if a.api_key:
        headers["Authorization"] = "Bearer " + a.api_key
    c = http.client.HTTPConnection(a.host, a.port, timeout=60)
    took = []
    for _ in range(a.requests):
        start = time.perf_counter()
        if a.body:
            c.request("POST", a.path, body=a.body, headers=headers)
        else:
            c.request("GET", a.path, headers=headers)
        r = c.getresponse()
        r.read()
        if r.status != 200:
            raise SystemExit(f"{a.path}: HTTP {r.status}")
        took.append((time.perf_counter() - start) * 1000)
    c.close()
    rest = sorted(took[1:])
    print(f"{a.requests} requests on one connection to {a.path}: first {took[0]:.2f} ms; the "
          f"rest median {statistics.median(rest):.2f} ms, p90 {rest[int(0.9 * len(rest))]:.2f} ms, "
          f"max {rest[-1]:.2f} ms")


if __name__ == "__main__":
    main()
