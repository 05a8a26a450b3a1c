#!/usr/bin/env python3
"""The live page of `tacho top --listen` (issue 39): its size, the size of /live.json with a
full 15-minute window, what a refresh costs the server, and what keeping the window costs per
sample.

Usage:
    cargo build --release && python3 benches/live_page.py [--tacho target/release/tacho]
        [--interval 0.1] [--requests 1000]

A `tacho top --interval INTERVAL --listen 127.0.0.1:PORT` (serve only) runs until its window
holds its 900 intervals (90 s at 100 ms). Printed:
  - the sizes of / and of /live.json (with how many charts this machine's disks and
    interfaces make);
  - CPU per refresh: tacho's CPU time (utime + stime from /proc/PID/stat) over --requests
    back-to-back GET /live.json, less its CPU over as long with no request, per request;
  - the same for the page's refreshes once it has the window: GET /live.json?after=SEQ, SEQ
    the last answer's, and the size of an answer with one new interval;
  - CPU per sample: tacho's CPU per interval in the first 10 s (at most 100 intervals in the
    window) and in 10 s once it is full (900): the JSON is rendered from the whole window
    once per sample, so the difference is what 800 more points cost each sample.
Nothing here is a pass/fail test: timings on a shared machine are noisy.
"""

import argparse
import json
import os
import socket
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TACHO = os.path.join(
    os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "tacho"
)
TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n".encode())
        chunks = []
        while True:
            b = s.recv(1 << 16)
            if not b:
                break
            chunks.append(b)
    answer = b"".join(chunks)
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b" ")[1].decode(), body


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tacho", default=DEFAULT_TACHO)
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--requests", type=int, default=1000)
    a = ap.parse_args()
    port = free_port()
    t = subprocess.Popen(
        [a.tacho, "top", "--interval", f"{int(a.interval * 1000)}ms", "--listen",
         f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        start = time.monotonic()
        while True:
            try:
                if get(port, "/live.json")[0] == "200":
                    break
            except OSError:
                pass
            time.sleep(0.05)
        c0 = cpu_s(t.pid)
        time.sleep(10)
        early = (cpu_s(t.pid) - c0) / (10 / a.interval)
        full_at = 900 * a.interval + 2
        time.sleep(max(0, full_at - (time.monotonic() - start)))
        c0 = cpu_s(t.pid)
        time.sleep(10)
        full = (cpu_s(t.pid) - c0) / (10 / a.interval)
        status, page = get(port, "/")
        status, doc = get(port, "/live.json")
        d = json.loads(doc)
        print(f"page /: {len(page)} bytes; /live.json: {len(doc)} bytes, {len(d['t'])} points, "
              f"{len(d['charts'])} charts, {sum(len(c['series']) for c in d['charts'])} lines")
        c0, w0 = cpu_s(t.pid), time.monotonic()
        for _ in range(a.requests):
            get(port, "/live.json")
        busy_cpu, took = cpu_s(t.pid) - c0, time.monotonic() - w0
        c0 = cpu_s(t.pid)
        time.sleep(took)
        idle_cpu = cpu_s(t.pid) - c0
        print(f"CPU per refresh (GET /live.json): {(busy_cpu - idle_cpu) / a.requests * 1e3:.3f} ms "
              f"({a.requests} requests in {took:.1f} s)")
        # As the page refreshes once it has the window: only what came after its last answer.
        seq = json.loads(get(port, "/live.json")[1])["seq"]
        status, one = get(port, f"/live.json?after={seq - 1}")
        print(f"/live.json?after=SEQ with {len(json.loads(one)['t'])} new interval(s): "
              f"{len(one)} bytes")
        c0, w0 = cpu_s(t.pid), time.monotonic()
        points = 0
        for _ in range(a.requests):
            d = json.loads(get(port, f"/live.json?after={seq}")[1])
            points += len(d["t"])
            seq = d["seq"]
        busy_cpu, took = cpu_s(t.pid) - c0, time.monotonic() - w0
        c0 = cpu_s(t.pid)
        time.sleep(took)
        idle_cpu = cpu_s(t.pid) - c0
        print(f"CPU per refresh (GET /live.json?after=SEQ): "
              f"{(busy_cpu - idle_cpu) / a.requests * 1e3:.3f} ms ({a.requests} requests in "
              f"{took:.1f} s, {points} new intervals in all)")
        print(f"CPU per sample: {early * 1e3:.2f} ms with <=100 intervals kept, "
              f"{full * 1e3:.2f} ms with 900")
        with open("/proc/loadavg") as f:
            print(f"load average at the end: {' '.join(f.read().split()[:3])}")
    finally:
        t.terminate()
        t.wait()


if __name__ == "__main__":
    main()
