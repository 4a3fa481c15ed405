#!/usr/bin/env python3
"""body_memory_load: large request bodies against a running router, for its memory per body.

Sends --clients concurrent POSTs of a --mib MiB body to the OpenAI port (each retried while the
router answers 503, its budget of bodies in flight being full, until served once), samples the
router's VmRSS every 5 ms, and prints RSS before / peak / after (1 s after the last answer).

  tools/body_memory_load.py --port=8000 --router-pid=PID --clients=32 --mib=30 --kind=prompt

--kind=prompt: a completion whose prompt string fills the body (parsed, then refused: the
prompt passes the model's length); --kind=ids: the same with a prompt of token ids, the
densest JSON there is ("5,5,5,...", 2 bytes an id); --kind=pad: a small completion padded with
JSON whitespace (the body's copies only). The peak is also read from the kernel's VmHWM (reset
through /proc/PID/clear_refs first, when allowed), which a 5 ms sampler can miss.
"""
import argparse
import http.client
import json
import threading
import time


def status_mib(pid, field):
    """A field of /proc/PID/status ("VmRSS", "VmHWM") in MiB; -1 when absent."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return -1


def rss_mib(pid):
    return status_mib(pid, "VmRSS")


def reset_hwm(pid):
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def body_of(kind, size):
    if kind == "ids":
        head = '{"max_tokens": 4, "temperature": 0, "prompt": ['
        return (head + "5," * ((size - len(head) - 3) // 2) + "5]}").encode()
    if kind == "pad":
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0})
        return (body + " " * (size - len(body))).encode()
    head = '{"max_tokens": 4, "temperature": 0, "prompt": "'
    tail = '"}'
    return (head + "a " * ((size - len(head) - len(tail)) // 2) + tail).encode()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--router-pid", type=int, required=True)
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--mib", type=int, default=30)
    p.add_argument("--kind", choices=["prompt", "ids", "pad"], default="prompt")
    p.add_argument("--api-key", default="")
    a = p.parse_args()
    body = body_of(a.kind, a.mib << 20)
    headers = {"Content-Type": "application/json"}
    if a.api_key:
        headers["Authorization"] = "Bearer " + a.api_key
    statuses, retries = [], [0]
    lock = threading.Lock()

    def client():
        while True:
            c = http.client.HTTPConnection("127.0.0.1", a.port, timeout=300)
            try:
                c.request("POST", "/v1/completions", body=body, headers=headers)
                r = c.getresponse()
                r.read()
                status = r.status
            except (ConnectionError, http.client.HTTPException):
                status = 503  # refused mid-send: the budget was full
            finally:
                c.close()
            if status != 503:
                with lock:
                    statuses.append(status)
                return
            with lock:
                retries[0] += 1
            time.sleep(0.05)

    hwm_reset = reset_hwm(a.router_pid)
    before = rss_mib(a.router_pid)
    peak = [before]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_mib(a.router_pid))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    start = time.time()
    threads = [threading.Thread(target=client) for _ in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.time() - start
    time.sleep(1)
    done.set()
    sampler.join()
    after = rss_mib(a.router_pid)
    hwm = f", VmHWM {status_mib(a.router_pid, 'VmHWM'):.0f} MiB" if hwm_reset else ""
    print(f"{a.clients} clients x {a.mib} MiB ({a.kind}): RSS {before:.0f} MiB -> peak "
          f"{peak[0]:.0f} MiB{hwm} -> {after:.0f} MiB after; statuses {sorted(set(statuses))}, "
          f"{retries[0]} retries after 503, {took:.1f} s")


if __name__ == "__main__":
    main()
