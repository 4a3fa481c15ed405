"""The soak's cluster: one real pagoda-router and N real pagoda-worker processes, each its own
process so a worker can be killed (SIGKILL), drained (SIGTERM) and started again in its slot."""
import os
import random
import re
import signal
import subprocess
import time
import urllib.request


def rss_mib(pid):
    """VmRSS of a live process in MiB; None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def cpu_seconds(pid):
    """User + system CPU seconds a live process has used; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def parse_metrics(text):
    """Prometheus text to {"name{labels}": value}, and {"name": [values]} for labelled series."""
    values = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        try:
            values[key] = float(value)
        except ValueError:
            continue
    return values


class Cluster:
    def __init__(self, args, work):
        self.args = args
        self.work = work
        self.http = 20000 + random.randrange(10000)
        self.grpc = self.http + 1
        self.worker_port = self.http + 2
        self.router = None
        self.workers = [None] * args.workers  # slot -> Popen
        self.starts = [0] * args.workers  # slot -> processes started in it
        self.started_at = {}  # pid -> time.monotonic() at its start

    def start(self):
        router = [f"{self.args.bin}/pagoda-router", f"--model={self.args.model}",
                  "--host=127.0.0.1", f"--port={self.grpc}", f"--http-port={self.http}",
                  f"--worker-port={self.worker_port}", "--insecure-worker-port",
                  f"--speculative={self.args.speculative}"]
        if self.args.tokenizer:
            router.append(f"--tokenizer={self.args.tokenizer}")
        if self.args.chat_template:
            router += [f"--chat-template={self.args.chat_template}",
                       f"--tool-call-parser={self.args.tool_call_parser}"]
        self.router = subprocess.Popen(router, stdout=self._log("router"),
                                       stderr=subprocess.STDOUT)
        self.started_at[self.router.pid] = time.monotonic()
        for slot in range(self.args.workers):
            self.start_worker(slot)
        self.wait_workers(self.args.workers)

    def start_worker(self, slot):
        self.starts[slot] += 1
        command = [f"{self.args.bin}/pagoda-worker", f"--router=127.0.0.1:{self.worker_port}",
                   f"--model={self.args.model}", f"--threads={self.args.worker_threads}",
                   "--kv-transfer-port=-1"]
        self.workers[slot] = subprocess.Popen(
            command, stdout=self._log(f"worker{slot}.{self.starts[slot]}"),
            stderr=subprocess.STDOUT)
        self.started_at[self.workers[slot].pid] = time.monotonic()

    def kill_worker(self, slot):
        """SIGKILL: the router finds the stream broken and replays its sequences elsewhere."""
        process = self.workers[slot]
        process.send_signal(signal.SIGKILL)
        process.wait()

    def drain_worker(self, slot, timeout):
        """SIGTERM: the worker drains (README, Serving) and exits 0; returns its exit code."""
        process = self.workers[slot]
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            return None

    def metrics(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/metrics", timeout=10) as r:
            return parse_metrics(r.read().decode())

    def num_workers(self):
        try:
            for key, value in self.metrics().items():
                if key.startswith("pagoda_num_workers{"):
                    return int(value)
        except OSError:
            pass
        return -1

    def worker_ids(self):
        """The router's ids of its connected workers (a worker that joins again gets a new one)."""
        try:
            return {key.split('worker="')[1].split('"')[0] for key in self.metrics()
                    if key.startswith("pagoda_kv_cache_usage{")}
        except OSError:
            return set()

    def wait_workers(self, want, timeout=120, before=None, stop=None):
        """Until `want` workers are connected and, after a fault, their ids are not `before`'s
        (the router may not have seen the old process go yet)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ids = self.worker_ids()
            if self.num_workers() == want and len(ids) == want and ids != before:
                return True
            if self.router.poll() is not None:
                raise RuntimeError(f"the router exited ({self.router.returncode}); see {self.work}")
            if stop is not None and stop.is_set():
                return False
            time.sleep(0.2)
        return False

    def worker_id(self, slot):
        """The router's id of the worker process in `slot`, from its "worker N (host:PID)
        connected" log line; None before it connected."""
        pid = self.workers[slot].pid
        pattern = re.compile(rf"worker (\d+) \([^)]*:{pid}\) connected")
        with open(os.path.join(self.work, "router.log"), errors="replace") as f:
            for line in f:
                m = pattern.search(line)
                if m:
                    return m.group(1)
        return None

    def kv_usage(self, worker_id):
        """pagoda_kv_cache_usage of one worker (blocks in use, 0..1); None when absent."""
        try:
            for key, value in self.metrics().items():
                if key.startswith("pagoda_kv_cache_usage{") and f'worker="{worker_id}"' in key:
                    return value
        except OSError:
            pass
        return None

    def model_name(self):
        import json
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/v1/models", timeout=10) as r:
            return json.load(r)["data"][0]["id"]

    def pids(self):
        """{"router": pid, "worker0": pid, ...} of the live processes."""
        pids = {"router": self.router.pid}
        for slot, process in enumerate(self.workers):
            if process is not None and process.poll() is None:
                pids[f"worker{slot}"] = process.pid
        return pids

    def stop(self):
        for process in self.workers + [self.router]:
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()

    def _log(self, name):
        return open(os.path.join(self.work, f"{name}.log"), "wb")
