#!/usr/bin/env python3
"""Issue 28's served benchmarks of KV transfers between workers (docs/BENCHMARKS.md §25).

Starts pagoda-router with --spawn-workers (one thread each, loopback transfers), sends prompts
of random token ids over the OpenAI HTTP API (greedy, ignore_eos) and reads the router's
/metrics before and after. One scenario per run:

  away    TTFT of a prompt placed away from its prefix: with --placement=round_robin the first
          request (prefix + question A) computes the prefix on worker 0, the measured one
          (prefix + question B) lands on worker 1, which pulls it or computes it. Then a stream
          of --groups groups of --group-size requests (one prefix a group; 3 makes the
          workers take turns computing the groups' prefixes), --concurrency at a time.
  drain   --seqs streams on 2 workers; after --kill-after-s of decoding one worker is sent
          SIGTERM. Reports recomputed tokens, moved sequences and the largest gap between two
          tokens of a stream vs the median inter-token gap.
  preempt --seqs streams on worker 0 alone, whose pool (--num-kv-blocks) is too small for
          them, so it preempts; once every stream has its first token and --join-after-s more,
          worker 1 (with room) joins. With transfers worker 0 hands its preempted sequences
          over with the blocks they had computed; without, worker 1 stays idle (nothing new
          is placed) and worker 0 computes them again.
  system  One system prompt of --prefix-len tokens over --workers workers, --seqs requests with
          different questions after it (the first alone, then the rest at once): prefill tokens
          computed = prompt tokens - prefix-cache hits (pulled tokens are hits too).

  tools/kv_transfer_bench.py away --model=/tmp/tinyllama.bin --lens=512,1000,2000 --kv-transfer=true
"""

import argparse
import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

COUNTERS = (
        "pagoda_prompt_tokens_total", "pagoda_prefix_cache_queries_total",
        "pagoda_prefix_cache_hits_total",
        "pagoda_kv_transfer_blocks_total", "pagoda_kv_transfer_bytes_total",
        "pagoda_kv_transfer_saved_tokens_total", "pagoda_kv_transfer_failures_total",
        "pagoda_kv_migrated_sequences_total", "pagoda_recomputed_tokens_total",
        "pagoda_kv_transfer_seconds_sum", "pagoda_kv_transfer_seconds_count",
        "pagoda_generation_tokens_total", "pagoda_num_preemptions_total")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Router:
    """pagoda-router with spawned workers; stopped on exit."""

    def __init__(self, a, workers, extra=()):
        if a.attach:  # a router started elsewhere (tools/kv_transfer_netns.sh): HTTP,METRICS ports
            self.http, self.metrics = (int(x) for x in a.attach.split(","))
            self.proc = None
            return
        self.http = free_port()
        self.metrics = free_port()
        self.worker_port = free_port()
        self.started = []  # workers started by start_worker
        os.environ.setdefault("PAGODA_WORKER_TOKEN", "%032x" % random.getrandbits(128))
        args = [
                os.path.join(a.bin, "pagoda-router"), "--model=" + a.model, "--host=127.0.0.1",
                "--port=%d" % free_port(), "--worker-port=%d" % self.worker_port,
                "--http-port=%d" % self.http, "--metrics-port=%d" % self.metrics,
                "--served-model-name=m", "--spawn-workers=%d" % workers, "--worker-threads=1",
                "--kv-transfer=" + a.kv_transfer, "--worker-kv-cache-mb=%d" % a.kv_cache_mb
        ] + list(extra) + a.router_flag
        self.log = open("/tmp/kv_transfer_bench_router.log", "w")
        self.proc = subprocess.Popen(args, stderr=self.log, stdout=self.log)
        deadline = time.time() + 300
        while self.scrape().get("pagoda_num_workers", 0) != workers:
            if self.proc.poll() is not None or time.time() > deadline:
                sys.exit("router did not come up; see /tmp/kv_transfer_bench_router.log")
            time.sleep(0.2)

    def scrape(self):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.metrics, timeout=10)
            c.request("GET", "/metrics")
            text = c.getresponse().read().decode()
        except OSError:
            return {}
        out = {}
        for line in text.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            name, _, value = line.rpartition(" ")
            if "{" in name:  # sum labelled series (per worker) under the bare name
                name = name[:name.index("{")]
            try:
                out[name] = out.get(name, 0.0) + float(value)
            except ValueError:
                pass
        return out

    def start_worker(self, a, flags):
        """Starts one more worker (1 thread, transfers on loopback) and waits for it to join."""
        n = self.scrape().get("pagoda_num_workers", 0) + 1
        log = open("/tmp/kv_transfer_bench_worker%d.log" % len(self.started), "w")
        self.started.append(subprocess.Popen([
                os.path.join(a.bin, "pagoda-worker"), "--router=127.0.0.1:%d" % self.worker_port,
                "--model=" + a.model, "--threads=1", "--kv-transfer-port=-1"] + flags,
                stdout=log, stderr=log))
        deadline = time.time() + 300
        while self.scrape().get("pagoda_num_workers", 0) < n:
            if (self.started[-1].poll() is not None or self.proc.poll() is not None or
                    time.time() > deadline):
                sys.exit("worker did not join; see %s and %s" % (log.name, self.log.name))
            time.sleep(0.1)

    def workers(self):
        """The spawned workers' pids, in spawn order."""
        kids = []
        for task in os.listdir("/proc/%d/task" % self.proc.pid):
            with open("/proc/%d/task/%s/children" % (self.proc.pid, task)) as f:
                kids += [int(p) for p in f.read().split()]
        return sorted(kids)

    def stop(self):
        if self.proc is None:
            return
        for w in self.started:
            w.send_signal(signal.SIGTERM)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def delta(before, after):
    return {k.replace("pagoda_", ""): after.get(k, 0) - before.get(k, 0) for k in COUNTERS}


def complete(port, prompt, max_tokens):
    """Streams one completion; returns the arrival times of its tokens (from the send)."""
    body = json.dumps({
            "model": "m", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True, "stream": True
    })
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    start = time.perf_counter()
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        sys.exit("HTTP %d: %s" % (r.status, r.read()[:300]))
    times = []
    for raw in r:
        line = raw.strip()
        if not line.startswith(b"data:") or line == b"data: [DONE]":
            continue
        chunk = json.loads(line[5:])
        if chunk["choices"] and chunk["choices"][0].get("text") is not None:
            times.append(time.perf_counter() - start)
    return times


def tokens(rng, n):
    return [rng.randrange(100, 31000) for _ in range(n)]


def run_parallel(port, prompts, max_tokens, concurrency):
    results = [None] * len(prompts)
    lock = threading.Lock()
    nxt = [0]

    def work():
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(prompts):
                return
            results[i] = complete(port, prompts[i], max_tokens)

    threads = [threading.Thread(target=work) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def away(a, rng):
    r = Router(a, 2, ["--placement=round_robin"])
    try:
        complete(r.http, tokens(rng, 8), 2)  # warm-up (worker 0), then worker 1
        complete(r.http, tokens(rng, 8), 2)
        for n in [int(x) for x in a.lens.split(",")]:
            ttfts, first = [], []
            before = r.scrape()
            for _ in range(a.repeat):
                prefix = tokens(rng, n)
                first.append(complete(r.http, prefix + tokens(rng, a.question_len), 1)[0])
                second = prefix + tokens(rng, a.question_len)
                ttfts.append(complete(r.http, second, a.output_len)[0])
            print(json.dumps({
                    "scenario": "away", "kv_transfer": a.kv_transfer, "prefix": n,
                    "question": a.question_len, "first_ttft_s": first, "away_ttft_s": ttfts,
                    "away_ttft_median_s": statistics.median(ttfts),
                    "delta": delta(before, r.scrape())
            }), flush=True)
        if a.groups:
            n = int(a.lens.split(",")[0])
            prompts = []
            for _ in range(a.groups):
                prefix = tokens(rng, n)
                prompts += [prefix + tokens(rng, a.question_len) for _ in range(a.group_size)]
            before = r.scrape()
            start = time.perf_counter()
            res = run_parallel(r.http, prompts, a.output_len, a.concurrency)
            wall = time.perf_counter() - start
            print(json.dumps({
                    "scenario": "away-stream", "kv_transfer": a.kv_transfer, "prefix": n,
                    "requests": len(prompts), "group_size": a.group_size,
                    "concurrency": a.concurrency,
                    "wall_s": wall, "requests_per_s": len(prompts) / wall,
                    "ttft_median_s": statistics.median(t[0] for t in res),
                    "ttft_s": [round(t[0], 3) for t in res], "delta": delta(before, r.scrape())
            }), flush=True)
    finally:
        r.stop()


def when_streaming(r, before, seqs, delay_s, at, action):
    """A thread (not started) that waits until `seqs` tokens came out since `before` (every
    stream has its first), then `delay_s` more, appends the time to `at` and runs `action`."""

    def run():
        while r.scrape().get("pagoda_generation_tokens_total", 0) - before.get(
                "pagoda_generation_tokens_total", 0) < seqs:
            time.sleep(0.05)
        time.sleep(delay_s)
        at.append(time.perf_counter())
        action()

    return threading.Thread(target=run)


def drain(a, rng):
    r = Router(a, 2, ["--placement=round_robin"])
    try:
        prompts = [tokens(rng, a.prompt_len) for _ in range(a.seqs)]
        victim = r.workers()[0]
        before = r.scrape()
        killed = []
        k = when_streaming(r, before, a.seqs, a.kill_after_s, killed,
                           lambda: os.kill(victim, signal.SIGTERM))
        k.start()
        start = time.perf_counter()
        res = run_parallel(r.http, prompts, a.output_len, a.seqs)
        k.join()
        # A moved stream's stall: its largest gap from the signal on (the gaps before it include the
        # other streams' prefills); the median gap is over all streams' whole runs.
        kill_at = killed[0] - start
        gaps_all, after = [], []
        for t in res:
            gaps_all += [t[i + 1] - t[i] for i in range(len(t) - 1)]
            late = [t[i + 1] - t[i] for i in range(len(t) - 1) if t[i + 1] > kill_at]
            after.append(max(late or [0]))
        after.sort(reverse=True)
        print(json.dumps({
                "scenario": "drain", "kv_transfer": a.kv_transfer, "seqs": a.seqs,
                "prompt": a.prompt_len, "output": a.output_len, "kill_at_s": kill_at,
                "tokens_per_stream": sorted(set(len(t) for t in res)),
                "median_gap_s": statistics.median(gaps_all),
                "largest_gap_after_kill_s": [round(g, 3) for g in after],
                "delta": delta(before, r.scrape())
        }), flush=True)
    finally:
        r.stop()


def preempt(a, rng):
    r = Router(a, 0, ["--placement=round_robin"])
    try:
        r.start_worker(a, ["--num-kv-blocks=%d" % a.num_kv_blocks])
        prompts = [tokens(rng, a.prompt_len) for _ in range(a.seqs)]
        before = r.scrape()
        joined = []
        j = when_streaming(r, before, a.seqs, a.join_after_s, joined,
                           lambda: r.start_worker(a, ["--kv-cache-mb=%d" % a.kv_cache_mb]))
        j.start()
        start = time.perf_counter()
        res = run_parallel(r.http, prompts, a.output_len, a.seqs)
        wall = time.perf_counter() - start
        j.join()
        ends = sorted(t[-1] for t in res)
        print(json.dumps({
                "scenario": "preempt", "kv_transfer": a.kv_transfer, "seqs": a.seqs,
                "prompt": a.prompt_len, "output": a.output_len, "blocks": a.num_kv_blocks,
                "joined_at_s": round(joined[0] - start, 3) if joined else None,
                "wall_s": round(wall, 3), "last_stream_end_s": round(ends[-1], 3),
                "median_stream_end_s": round(statistics.median(ends), 3),
                "tokens_per_stream": sorted(set(len(t) for t in res)),
                "delta": delta(before, r.scrape())
        }), flush=True)
    finally:
        r.stop()


def system(a, rng):
    r = Router(a, a.workers, ["--placement=" + a.placement])
    try:
        prefix = tokens(rng, int(a.lens.split(",")[0]))
        prompts = [prefix + tokens(rng, a.question_len) for _ in range(a.seqs)]
        before = r.scrape()
        start = time.perf_counter()
        complete(r.http, prompts[0], a.output_len)
        res = run_parallel(r.http, prompts[1:], a.output_len, len(prompts) - 1)
        wall = time.perf_counter() - start
        d = delta(before, r.scrape())
        # Pulled tokens count as prefix-cache hits too (they are found cached, on a peer).
        d["computed_prefill_tokens"] = d["prompt_tokens_total"] - d["prefix_cache_hits_total"]
        print(json.dumps({
                "scenario": "system", "kv_transfer": a.kv_transfer, "workers": a.workers,
                "placement": a.placement, "prefix": len(prefix), "requests": len(prompts),
                "wall_s": wall, "ttft_median_s": statistics.median(t[0] for t in res), "delta": d
        }), flush=True)
    finally:
        r.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("scenario", choices=["away", "drain", "preempt", "system"])
    p.add_argument("--model", required=True)
    p.add_argument("--bin", default="build/bin")
    p.add_argument("--kv-transfer", default="true", choices=["true", "false"])
    p.add_argument("--kv-cache-mb", type=int, default=1024, help="per spawned worker")
    p.add_argument("--lens", default="1000", help="prefix lengths (away); the first: system")
    p.add_argument("--question-len", type=int, default=16)
    p.add_argument("--output-len", type=int, default=8)
    p.add_argument("--repeat", type=int, default=1, help="away: measured requests per length")
    p.add_argument("--groups", type=int, default=0, help="away: a stream of this many groups")
    p.add_argument("--group-size", type=int, default=3, help="away: requests sharing a prefix")
    p.add_argument("--concurrency", type=int, default=6, help="away: requests in flight")
    p.add_argument("--seqs", type=int, default=32)
    p.add_argument("--prompt-len", type=int, default=64, help="drain")
    p.add_argument("--kill-after-s", type=float, default=2.0, help="drain")
    p.add_argument("--num-kv-blocks", type=int, default=256, help="preempt: worker 0's pool")
    p.add_argument("--join-after-s", type=float, default=2.0, help="preempt")
    p.add_argument("--workers", type=int, default=4, help="system")
    p.add_argument("--placement", default="prefix", help="system")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--attach", default="", help="HTTP,METRICS ports of a running router (away)")
    p.add_argument("--router-flag", action="append", default=[], help="more router flags")
    a = p.parse_args()
    {"away": away, "drain": drain, "preempt": preempt, "system": system}[a.scenario](a, random.Random(a.seed))


if __name__ == "__main__":
    main()
