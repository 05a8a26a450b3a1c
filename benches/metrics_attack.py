#!/usr/bin/env python3
"""tacho top --listen under the attacks of issue 12 §4: peak memory and a good client's answers.

Usage:
    cargo build --release && python3 benches/metrics_attack.py [--seconds 20] [--nofile 128]
        [--tacho target/release/tacho]

For each attack a fresh `tacho top --interval 200ms --listen 127.0.0.1:PORT` is started (its
open-file limit lowered to --nofile for the idle-socket attack, so descriptors run out fast),
the attack runs for --seconds while a well-behaved client scrapes /metrics back to back, and
tacho's VmRSS is read every 20 ms. Printed per attack: peak RSS, RSS after the attackers left,
the good client's scrapes (ok / total) and its worst and median answer time, and whether tacho
was still alive. The attacks:
  pipelined  one connection every 200 ms sends 500 pipelined GET /metrics and never reads
             (the last 100 are held open)
  headers    4 clients send endless 1 KiB header lines, reconnecting when cut off
  idle       600 connections opened and left idle
Nothing here is a pass/fail test: timings on a shared machine are noisy.
"""

import argparse
import os
import resource
import socket
import statistics
import subprocess
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TACHO = os.path.join(
    os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "tacho"
)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def scrape(port, limit=30.0):
    """One GET /metrics read to its Content-Length; returns (ok, seconds)."""
    start = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=limit) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
            data = b""
            total = None
            while total is None or len(data) < total:
                s.settimeout(max(0.001, limit - (time.monotonic() - start)))
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
                if total is None and b"\r\n\r\n" in data:
                    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()
                    for line in head.split("\r\n"):
                        if line.startswith("content-length:"):
                            total = len(head) + 4 + int(line.split(":", 1)[1])
            ok = data.startswith(b"HTTP/1.1 200") and total == len(data)
    except OSError:
        ok = False
    return ok, time.monotonic() - start


def start_tacho(tacho, nofile):
    for _ in range(5):
        port = free_port()

        def limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        p = subprocess.Popen(
            [tacho, "top", "--interval", "200ms", "--listen", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=limit,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and p.poll() is None:
            if scrape(port, 2.0)[0]:
                return p, port
            time.sleep(0.1)
        p.kill()
        p.wait()
    raise SystemExit("tacho never served /metrics")


def connect(port):
    try:
        return socket.create_connection(("127.0.0.1", port), timeout=0.3)
    except OSError:
        return None


def pipelined(port, stop):
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 500
    held = []
    while not stop.is_set():
        s = connect(port)
        if s:
            s.settimeout(0.2)
            try:
                s.sendall(request)
            except OSError:
                pass
            held.append(s)
        if len(held) > 100:
            held.pop(0).close()
        time.sleep(0.2)
    for s in held:
        s.close()


def headers(port, stop):
    line = b"X-Filler: " + b"a" * 1000 + b"\r\n"

    def flood():
        while not stop.is_set():
            s = connect(port)
            if not s:
                continue
            s.settimeout(0.2)
            try:
                s.sendall(b"GET /metrics HTTP/1.1\r\n")
                while not stop.is_set():
                    try:
                        s.sendall(line)
                    except socket.timeout:
                        pass
            except OSError:
                pass
            finally:
                s.close()

    threads = [threading.Thread(target=flood) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def idle(port, stop):
    held = []
    while not stop.is_set():
        if len(held) < 600:
            s = connect(port)
            if s:
                held.append(s)
        else:
            time.sleep(0.05)
    for s in held:
        s.close()


def run(tacho, name, attack, seconds, nofile):
    p, port = start_tacho(tacho, nofile)
    stop = threading.Event()
    peak = [0]

    def watch():
        while not stop.is_set():
            peak[0] = max(peak[0], rss_kib(p.pid))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    attacker = threading.Thread(target=attack, args=(port, stop))
    watcher.start()
    attacker.start()
    times, oks = [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ok, took = scrape(port)
        oks += ok
        times.append(took)
        time.sleep(0.05)
    stop.set()
    attacker.join()
    watcher.join()
    time.sleep(1)
    after = rss_kib(p.pid)
    alive = p.poll() is None
    p.kill()
    p.wait()
    print(
        f"{name:10} peak RSS {peak[0] / 1024:7.1f} MiB  after {after / 1024:6.1f} MiB  "
        f"scrapes {oks}/{len(times)}  worst {max(times):6.3f} s  "
        f"median {statistics.median(times):6.3f} s  alive {alive}"
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--nofile", type=int, default=128)
    ap.add_argument("--tacho", default=DEFAULT_TACHO)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    print(f"tacho: {args.tacho}; {args.seconds:g} s per attack")
    run(args.tacho, "pipelined", pipelined, args.seconds, 1024)
    run(args.tacho, "headers", headers, args.seconds, 1024)
    run(args.tacho, "idle", idle, args.seconds, args.nofile)


if __name__ == "__main__":
    main()
