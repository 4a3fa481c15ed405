#!/usr/bin/env python3
"""soak: a real pagoda-router and real pagoda-worker processes under mixed traffic for
--duration, a worker killed (SIGKILL) and started again every --fault-every seconds and one
drained (SIGTERM) halfway; then checks that nothing leaked, drifted, was lost or changed
(issue 38, item 2; docs/BENCHMARKS.md §32):

  - RSS of the router and of each worker slot after warm-up (the end of the first window)
    against the end, after the traffic: growth <= --max-rss-growth-mib (50);
  - p99 TTFT (streamed requests, first token) of the last --window against the first:
    <= --max-ttft-ratio (1.2); the window is 5 minutes, or a third of a shorter run. A window
    with too few requests to have 20 above its p99 is judged at the highest percentile that
    has (p95 for 400 requests). When other processes load the machine past its CPUs, the
    bound grows by that contention's growth (the load average less our processes' CPU; ours
    counted as in the first window);
  - every request answered, or failed with an error a fault explains (the request was in
    flight when a worker was killed or drained); a client abort is an abort; every seeded or
    greedy request answered exactly as in the reference run on the quiet cluster at the start
    (texts, token ids, tool calls, finish reasons; prompt logprobs and embeddings within 1e-3);
  - after the traffic: the router's running, waiting and paused gauges and every worker's
    pagoda_kv_cache_usage back to 0, all workers connected, the router alive.

Traffic over the OpenAI API (completions, chat through a template, JSON schema, tool calls,
streamed and not, n > 1, client aborts, prompt logprobs, embeddings) and gRPC (`pagoda
generate`), speculative decoding on. Prints a table; exits 1 when a check fails.

  tools/soak/soak.py --bin=build/bin --model=../shared/models/stories260K-hf --duration=1800
"""
import argparse
import os
import random
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client  # noqa: E402
import mix  # noqa: E402
from cluster import Cluster, cpu_seconds, rss_mib  # noqa: E402


def parse_args(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--bin", default="build/bin", help="where pagoda-router, -worker, pagoda are")
    p.add_argument("--model", required=True, help="the served model (a directory or file)")
    p.add_argument("--tokenizer", default="", help="the router's --tokenizer, when needed")
    p.add_argument("--chat-template", default=os.path.join(here, "chatml_tools.jinja"),
                   help="the router's --chat-template ('' = the model's own; 'none' = no chat)")
    p.add_argument("--tool-call-parser", default="hermes")
    p.add_argument("--speculative", default="suffix", help="the router's --speculative")
    p.add_argument("--workers", type=int, default=3,
                   help="worker processes; slot 0 is never killed, the others take the faults")
    p.add_argument("--worker-threads", type=int, default=1)
    p.add_argument("--clients", type=int, default=4, help="concurrent client loops")
    p.add_argument("--rate", type=float, default=10,
                   help="requests per second offered, over all clients (Poisson arrivals; a "
                        "client whose last answer is late starts the next at once)")
    p.add_argument("--duration", type=float, default=1800, help="seconds of traffic")
    p.add_argument("--window", type=float, default=0,
                   help="TTFT window and warm-up, seconds (0 = min(300, duration / 3))")
    p.add_argument("--fault-every", type=float, default=0,
                   help="seconds between faults (0 = max(20, duration / 10))")
    p.add_argument("--max-rss-growth-mib", type=float, default=50)
    p.add_argument("--max-ttft-ratio", type=float, default=1.2)
    p.add_argument("--ttft-slack-ms", type=float, default=0,
                   help="a last p99 at most this far above the first passes too (for tiny "
                        "models, whose p99 TTFT is the scheduler's jitter)")
    p.add_argument("--request-timeout", type=float, default=120)
    p.add_argument("--seed", type=int, default=38)
    p.add_argument("--keep", action="store_true", help="keep the processes' logs")
    args = p.parse_args(argv)
    if args.workers < 2:
        p.error("--workers must be at least 2: one takes the faults while another serves")
    args.window = args.window or min(300.0, args.duration / 3)
    args.fault_every = args.fault_every or max(20.0, args.duration / 10)
    if args.chat_template == "none":
        args.chat_template = None
    return args


class Soak:
    def __init__(self, args, work):
        self.args = args
        self.cluster = Cluster(args, work)
        self.lock = threading.Lock()
        self.records = []  # (start, end, spec name, Outcome, mismatch or None); times from t0
        self.faults = []  # (time, what, slot, seconds to rejoin, detail)
        self.rss = []  # (time, process name, pid, MiB, seconds since the process started)
        # (time, the machine's 1-minute load average, the CPUs our processes used since the
        # last sample): the load less ours is the neighbours'
        self.load = []
        self.cpu_seen = {}  # pid: (time, CPU seconds) at the last sample
        self.failures = []
        self.t0 = None
        self.stop = threading.Event()
        self.bursts = []  # threads of the long streams started before each fault

    def now(self):
        return time.monotonic() - self.t0

    def request(self, spec):
        a = self.args
        return client.run(spec, self.cluster.http, self.cluster.grpc, a.bin, a.request_timeout)

    def reference(self, specs):
        """Each checked request once, one at a time, on the quiet cluster."""
        answers = {}
        for spec in specs:
            outcome = self.request(spec)
            if not outcome.ok:
                self.failures.append(f"reference {spec['name']}: {outcome.error}")
                continue
            answers[spec["name"]] = outcome.result
        return answers

    def checked(self, spec):
        start = self.now()
        outcome = self.request(spec)
        end = self.now()
        mismatch = None
        if outcome.ok and spec["name"] in self.answers:
            mismatch = client.same(self.answers[spec["name"]], outcome.result)
        with self.lock:
            self.records.append((start, end, spec["name"], outcome, mismatch))

    def burst(self):
        """The long streams, started together; returns 0.3 s later, so the fault finds them
        running (the report says how much of the victim's KV was in use)."""
        threads = [threading.Thread(target=self.checked, args=(spec,)) for spec in self.long]
        for t in threads:
            t.start()
        self.stop.wait(0.3)
        return threads

    def client_loop(self, index, specs, answers):
        rng = random.Random(self.args.seed * 1000 + index)
        chat = self.args.chat_template is not None
        next_at = self.now()
        while True:
            next_at += rng.expovariate(self.args.rate / self.args.clients)
            if self.stop.wait(max(0.0, next_at - self.now())):
                return
            if rng.random() < 0.5:
                spec = rng.choice(specs)
            else:
                spec = mix.unchecked_spec(rng, chat)
            self.checked(spec)

    def fault_loop(self):
        """Every --fault-every seconds a worker of slots 1.. is killed and started again; the
        middle fault drains instead (SIGTERM, exit 0 expected)."""
        a = self.args
        num_faults = int(a.duration // a.fault_every)
        if a.duration % a.fault_every == 0:
            num_faults -= 1  # none at the very end
        for k in range(1, num_faults + 1):
            if self.stop.wait(max(0.0, k * a.fault_every - self.now())):
                return
            slot = 1 + (k - 1) % (a.workers - 1)
            self.bursts += self.burst()
            before = self.cluster.worker_ids()
            victim = self.cluster.worker_id(slot)
            held = self.cluster.kv_usage(victim) if victim is not None else None
            at = self.now()
            if k == (num_faults + 1) // 2:
                code = self.cluster.drain_worker(slot, timeout=60)
                what, detail = "drain", f"exit {code} after {self.now() - at:.1f} s"
                if code != 0:
                    self.failures.append(f"drained worker {slot} exited {code}")
            else:
                self.cluster.kill_worker(slot)
                what, detail = "kill -9", ""
            down = self.now()
            self.cluster.start_worker(slot)
            joined = self.cluster.wait_workers(a.workers, timeout=60, before=before,
                                               stop=self.stop)
            if not joined and not self.stop.is_set():
                self.failures.append(f"worker {slot} did not rejoin after {what} at {at:.0f} s")
            if held is not None:
                detail = (detail + "; " if detail else "") + f"it held {held:.2%} of its KV"
            with self.lock:
                self.faults.append((at, what, slot, down, self.now(), detail))

    def rss_loop(self):
        while not self.stop.wait(5):
            self.sample_rss()

    def sample_rss(self):
        t = self.now()
        ours = 0.0
        seen = {}
        for name, pid in self.cluster.pids().items():
            used = cpu_seconds(pid)
            if used is not None:
                seen[pid] = (t, used)
                if pid in self.cpu_seen and t > self.cpu_seen[pid][0]:
                    ours += (used - self.cpu_seen[pid][1]) / (t - self.cpu_seen[pid][0])
            mib = rss_mib(pid)
            if mib is not None:
                age = time.monotonic() - self.cluster.started_at[pid]
                with self.lock:
                    self.rss.append((t, name, pid, mib, age))
        self.cpu_seen = seen
        with self.lock:
            self.load.append((t, os.getloadavg()[0], ours))

    def run(self):
        a = self.args
        self.cluster.start()
        self.t0 = time.monotonic()
        probe = client.run({"api": "http", "path": "/v1/embeddings", "body": {"input": "hi"}},
                           self.cluster.http, self.cluster.grpc, a.bin, 30)
        self.embeddings = probe.ok
        specs = mix.reference_specs(a.seed, a.chat_template is not None, self.embeddings)
        self.long = mix.long_specs(a.seed, 2 * a.workers)
        answers = self.reference(specs + self.long)
        self.answers = answers
        self.reference_seconds = self.now()
        self.t0 = time.monotonic()
        threads = [threading.Thread(target=self.client_loop, args=(i, specs, answers))
                   for i in range(a.clients)]
        threads += [threading.Thread(target=self.fault_loop),
                    threading.Thread(target=self.rss_loop)]
        for t in threads:
            t.start()
        self.stop.wait(a.duration)
        self.stop.set()
        self.traffic_end = self.now()
        for t in threads:
            t.join()
        for t in self.bursts:  # all started: the fault thread has ended
            t.join()
        self.final = self.quiesce()
        try:
            self.counters = self.cluster.metrics()
        except OSError:
            self.counters = {}
        self.sample_rss()
        self.num_workers_end = self.cluster.num_workers()
        self.router_alive = self.cluster.router.poll() is None
        self.cluster.stop()

    def quiesce(self, timeout=60):
        """The gauges after the traffic: polled until all are 0 or `timeout` passes."""
        deadline = time.monotonic() + timeout
        while True:
            values = {}
            try:
                for key, value in self.cluster.metrics().items():
                    name = key.split("{")[0]
                    if name in ("pagoda_num_requests_running", "pagoda_num_requests_waiting",
                                "pagoda_num_requests_paused"):
                        values[name] = value
                    elif name == "pagoda_kv_cache_usage":
                        worker = key.split('worker="')[1].split('"')[0]
                        values[f"pagoda_kv_cache_usage{{worker={worker}}}"] = value
            except OSError as e:
                values = {"metrics": f"unreadable: {e}"}
            if all(v == 0 for v in values.values()) or time.monotonic() > deadline:
                return values
            time.sleep(0.5)


def percentile(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def p99(values):
    return percentile(values, 0.99)


# The tail percentile a TTFT window is judged by: p99, unless the window is too short to have
# kTailSamples above it; then the highest percentile that does (a 60 s window of ~400 requests
# is judged by its p95: its p99 is its 4th-slowest request, one scheduler hiccup).
kTailSamples = 20


def tail_quantile(n):
    return max(0.5, min(0.99, 1 - kTailSamples / n)) if n else 0.99


def report(soak):
    a = soak.args
    ok = not soak.failures
    lines = [f"soak: {a.duration:.0f} s of traffic, {a.rate:g} requests/s from {a.clients} "
             f"clients, {a.workers} workers "
             f"({a.worker_threads} thread each), model {a.model}, speculative {a.speculative}, "
             f"embeddings {'on' if soak.embeddings else 'not supported by the model: left out'}, "
             f"reference run {soak.reference_seconds:.1f} s",
             "", "| check | figure | limit | verdict |", "| --- | --- | --- | --- |"]

    def row(check, figure, limit, passed):
        nonlocal ok
        ok = ok and passed
        lines.append(f"| {check} | {figure} | {limit} | {'pass' if passed else 'FAIL'} |")

    # RSS: each process slot after warm-up (the first sample at or past the window of a process
    # up for 10 s or more: a worker started again is compared with its slot's warm one) vs the
    # end, after the traffic.
    for name in sorted({r[1] for r in soak.rss}):
        samples = [r for r in soak.rss if r[1] == name]
        after = [r for r in samples if r[0] >= a.window and r[4] >= 10] or samples
        first, last = after[0], samples[-1]
        peak = max(r[3] for r in after)
        restarted = " (restarted since)" if first[2] != last[2] else ""
        growth = last[3] - first[3]
        row(f"RSS {name}{restarted}",
            f"{first[3]:.1f} → {last[3]:.1f} MiB (+{growth:.1f}; peak {peak:.1f})",
            f"≤ +{a.max_rss_growth_mib:.0f} MiB", growth <= a.max_rss_growth_mib)

    # TTFT windows.
    w = a.window
    first = [r[3].ttft for r in soak.records if r[3].ttft is not None and r[0] < w]
    last = [r[3].ttft for r in soak.records
            if r[3].ttft is not None and r[0] >= soak.traffic_end - w]
    q = tail_quantile(min(len(first), len(last)))
    p_first, p_last = percentile(first, q), percentile(last, q)
    in_first = [x for x in soak.load if x[0] <= w]
    in_last = [x for x in soak.load if soak.traffic_end - w <= x[0] <= soak.traffic_end]

    def mean(xs):
        return sum(xs) / len(xs) if xs else float("nan")

    ratio = p_last / p_first if first and last else float("nan")
    # When the neighbours (other tests, other builds) load the machine past its CPUs, our
    # processes get a smaller share of them and every step takes longer. The bound grows by the
    # contention's growth: max(CPUs, neighbours' load + our first window's CPUs), last over
    # first. Our own CPUs count as in the first window in both, so a router that burns more as
    # it ages buys itself no slack.
    cpus = os.cpu_count()
    ours = mean([x[2] for x in in_first])
    neighbours_first = max(0.0, mean([x[1] for x in in_first]) - ours)
    neighbours_last = max(0.0, mean([x[1] - x[2] for x in in_last]))
    # (max() keeps its first argument against a NaN: a window without samples adds nothing.)
    contention = max(cpus, neighbours_last + ours) / max(cpus, neighbours_first + ours)
    allowed = a.max_ttft_ratio * max(1.0, contention)
    row(f"p{q * 100:.0f} TTFT, first vs last {w:.0f} s",
        f"{p_first * 1e3:.0f} ms (n={len(first)}) → {p_last * 1e3:.0f} ms (n={len(last)}), "
        f"×{ratio:.2f}; load average {mean([x[1] for x in in_first]):.1f} → "
        f"{mean([x[1] for x in in_last]):.1f} on {cpus} CPUs, ours {ours:.1f} → "
        f"{mean([x[2] for x in in_last]):.1f}",
        f"≤ ×{allowed:.2f}" + (" (×{:g} × contention ×{:.2f})".format(a.max_ttft_ratio, contention)
                               if allowed != a.max_ttft_ratio else "") +
        (f" or +{a.ttft_slack_ms:g} ms" if a.ttft_slack_ms else ""),
        ratio <= allowed or (p_last - p_first) * 1e3 <= a.ttft_slack_ms)

    # Requests.
    answered = sum(1 for r in soak.records if r[3].ok and not r[3].aborted)
    aborted = sum(1 for r in soak.records if r[3].aborted)
    checked = sum(1 for r in soak.records if r[3].ok and r[2] not in ("abort", "fresh"))
    mismatched = [r for r in soak.records if r[4]]
    errors = [r for r in soak.records if not r[3].ok]

    def explained(r):  # in flight while a worker was killed or drained, or rejoining
        return any(r[0] <= f[4] and f[0] <= r[1] for f in soak.faults)

    unexplained = [r for r in errors if not explained(r)]
    row("requests answered", f"{answered} ({checked} checked against the reference), "
        f"{aborted} aborted by the client", "—", True)
    row("answers changed vs the reference", str(len(mismatched)), "0", not mismatched)
    row("errors", f"{len(errors)} ({len(errors) - len(unexplained)} during a fault)",
        "0 outside a fault", not unexplained)

    # After the traffic.
    leaked = {k: v for k, v in soak.final.items() if v != 0}
    row("after the traffic: running, waiting, paused, KV blocks used",
        ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                  for k, v in soak.final.items()), "all 0", not leaked)
    row("workers connected at the end, router alive",
        f"{soak.num_workers_end}/{a.workers}, {'yes' if soak.router_alive else 'NO'}",
        f"{a.workers}, yes", soak.num_workers_end == a.workers and soak.router_alive)

    buckets = 6
    lines += ["", "TTFT over the run (p50 / p99 ms, n, load average):"]
    for b in range(buckets):
        lo, hi = soak.traffic_end * b / buckets, soak.traffic_end * (b + 1) / buckets
        xs = sorted(r[3].ttft for r in soak.records if r[3].ttft is not None and lo <= r[0] < hi)
        load = mean([x[1] for x in soak.load if lo <= x[0] < hi])
        if xs:
            lines.append(f"  {lo:7.0f}-{hi:.0f} s: {xs[len(xs) // 2] * 1e3:.0f} / "
                         f"{p99(xs) * 1e3:.0f} ms, n={len(xs)}, load {load:.1f}")
    def counter(name):
        return sum(v for k, v in soak.counters.items() if k.split("{")[0] == name)

    aborts = sum(v for k, v in soak.counters.items()
                 if k.startswith("pagoda_request_success_total") and 'reason="abort"' in k)
    lines += ["", "the router's counters at the end: "
              f"{counter('pagoda_generation_tokens_total'):.0f} tokens generated, "
              f"speculative drafts {counter('pagoda_spec_decode_num_drafts_total'):.0f} "
              f"({counter('pagoda_spec_decode_num_accepted_tokens_total'):.0f} of "
              f"{counter('pagoda_spec_decode_num_draft_tokens_total'):.0f} draft tokens kept), "
              f"sequences ended by abort {aborts:.0f}, "
              f"migrated with their KV {counter('pagoda_kv_migrated_sequences_total'):.0f}, "
              f"tokens recomputed {counter('pagoda_recomputed_tokens_total'):.0f}, "
              f"preemptions {counter('pagoda_num_preemptions_total'):.0f}"]
    lines += ["", "faults (seconds into the traffic: fault, worker down, rejoined):"]
    for at, what, slot, down, joined, detail in soak.faults:
        lines.append(f"  {at:7.1f} {what} worker {slot}: down {down:.1f}, rejoined {joined:.1f}"
                     + (f" ({detail})" if detail else ""))
    for r in mismatched[:10]:
        lines.append(f"  CHANGED {r[2]} at {r[0]:.1f} s: {r[4]}")
    for r in errors[:20]:
        lines.append(f"  {'error' if r in unexplained else 'error during a fault'} {r[2]} "
                     f"at {r[0]:.1f}-{r[1]:.1f} s: {r[3].error}")
    for f in soak.failures:
        lines.append(f"  FAIL {f}")
    lines.append("")
    lines.append("soak: " + ("PASS" if ok else "FAIL"))
    print("\n".join(lines), flush=True)
    return ok


def main(argv):
    args = parse_args(argv)
    work = tempfile.mkdtemp(prefix="pagoda-soak-")
    soak = Soak(args, work)
    try:
        soak.run()
    finally:
        soak.cluster.stop()
    ok = report(soak)
    if args.keep or not ok:
        print(f"soak: logs in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
