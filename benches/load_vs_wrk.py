#!/usr/bin/env python3
"""tacho load against wrk on the same nginx on loopback; prints the ratios.

Usage:
    cargo build --release && python3 benches/load_vs_wrk.py [--rounds 3] [--duration 5] \
        [--only throughput|timing]

Needs wrk and nginx (Debian: apt-get install wrk nginx-light). Starts its own nginx (one worker,
pinned to the last CPU, serving a 13-byte file with keep-alive, access log off) on a free
loopback port in a temporary directory, and stops it at the end.

1. Most throughput. Each round runs `wrk -t1 -cC -dD` and `tacho load --rate 1000000 -cC
   --duration D` (a rate no server here reaches: every connection sends as soon as it is free,
   as wrk does), alternating which goes first, each tool pinned to CPU 0 with taskset. wrk has
   no rate option (wrk2, which has, is not in Debian), so this is the only "same rate" both can
   run. Per tool: achieved requests a second (wrk's "Requests/sec", tacho's achieved_rps) and
   the tool's own CPU (user + system, getrusage of the child) per request. Ratios are tacho over
   wrk (throughput: higher is better; CPU per request: lower is better).
2. Timing error. `tacho load --rate R --duration D` at R = 1k, 5k, 10k, 20k: the generator's
   own lateness (schedule_lag_ns: how late it sent requests it was free to send on time) at p50
   and p99, with the achieved rate.
   With --realtime, tacho runs in the real-time class (chrt -f 10) for this part, so that on
   a machine busy with other work the figure is the generator's own error, not the wait for
   its CPU.
With --baseline BUILD, part 1 runs that build of tacho too ("before"), in the same rounds,
the three tools taking turns to go first: a change's before and after against the same wrk.
Figures are medians over the rounds. Nothing here is a pass/fail test: machines are noisy.
"""

import argparse
import json
import os
import re
import resource
import socket
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# $TACHO names another build (say, the one before a change) to measure.
TACHO = os.environ.get("TACHO") or os.path.join(
    os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "tacho")

NGINX_CONF = """
daemon off;
worker_processes 1;
worker_cpu_affinity {mask};
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {dir}/www;
    }}
}}
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_nginx(tmp):
    port = free_port()
    # nginx's worker runs as www-data (or nobody) when started as root: it must read the file.
    os.chmod(tmp, 0o755)
    os.makedirs(os.path.join(tmp, "www"))
    with open(os.path.join(tmp, "www", "index.html"), "w") as f:
        f.write("hello, world\n")
    last = os.cpu_count() - 1
    mask = "".join("1" if i == last else "0" for i in reversed(range(os.cpu_count())))
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(dir=tmp, port=port, mask=mask))
    p = subprocess.Popen(["nginx", "-p", tmp, "-c", conf])
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return p, port
        except OSError:
            time.sleep(0.05)
    p.kill()
    raise SystemExit("nginx did not start")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime, r.ru_stime


# ["chrt", "-f", "10"] with --realtime: the timing part's tacho in the real-time class, so
# other work on its CPU (a shared machine's builds) does not delay its wake-ups.
PRIORITY = []


def run(cmd):
    u0, s0 = children_cpu()
    out = subprocess.run(PRIORITY + ["taskset", "-c", "0"] + cmd, check=True, capture_output=True,
                         text=True).stdout
    u1, s1 = children_cpu()
    return out, (u1 - u0, s1 - s0)


def wrk(url, conns, duration):
    out, (user, system) = run(["wrk", "-t1", f"-c{conns}", f"-d{duration}s", url])
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    reqs = int(re.search(r"(\d+) requests in", out).group(1))
    return {"rps": rps, "cpu_per_req_us": (user + system) / reqs * 1e6,
            "user_per_req_us": user / reqs * 1e6}


def tacho(url, conns, duration, rate=1_000_000, binary=None):
    out, cpu = run([binary or TACHO, "load", url, "--rate", str(rate), "-c", str(conns),
                    "--duration", f"{duration}s", "--json", "--no-save"])
    user, system = cpu
    step = json.loads(out)["steps"][0]
    done = max(step["ok"] + sum(step["errors"].values()), 1)
    lag = step["schedule_lag_ns"] or {}
    return {"rps": step["achieved_rps"], "cpu_per_req_us": (user + system) / done * 1e6,
            "user_per_req_us": user / done * 1e6,
            "errors": sum(step["errors"].values()),
            "lag_p50_us": lag.get("p50", float("nan")) / 1e3,
            "lag_p99_us": lag.get("p99", float("nan")) / 1e3}


def median(rows, key):
    return statistics.median(r[key] for r in rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--connections", type=int, default=10)
    ap.add_argument("--only", choices=["throughput", "timing"],
                    help="run one of the two parts")
    ap.add_argument("--baseline", metavar="BUILD",
                    help="part 1: also run this tacho binary (the build before a change)")
    ap.add_argument("--realtime", action="store_true",
                    help="timing part: run tacho under chrt -f 10 (root), to measure its own "
                         "timing error apart from other work on a busy machine")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tacho-load-bench-") as tmp:
        nginx, port = start_nginx(tmp)
        url = f"http://127.0.0.1:{port}/"
        try:
            if args.only != "timing":
                throughput(url, args)
            if args.only != "throughput":
                if args.realtime:
                    PRIORITY[:] = ["chrt", "-f", "10"]
                timing(url, args)
        finally:
            nginx.terminate()
            nginx.wait()


def throughput(url, args):
    tools = ["wrk", "tacho"] + (["before"] if args.baseline else [])
    rows = {t: [] for t in tools}
    for i in range(args.rounds):
        # Each tool goes first in turn.
        order = tools[i % len(tools):] + tools[:i % len(tools)]
        for tool in order:
            if tool == "wrk":
                r = wrk(url, args.connections, args.duration)
            else:
                r = tacho(url, args.connections, args.duration,
                          binary=args.baseline if tool == "before" else None)
            rows[tool].append(r)
            print(f"round {i + 1} {tool}: {r['rps']:.0f} requests/s, "
                  f"{r['cpu_per_req_us']:.1f} µs CPU per request "
                  f"({r['user_per_req_us']:.1f} µs user)", flush=True)
    w, t = rows["wrk"], rows["tacho"]
    print(f"\nmost throughput, {args.connections} connections, one core each "
          f"(medians of {args.rounds} rounds):")
    for name in tools:
        r = rows[name]
        print(f"  {name:6} {median(r, 'rps'):9.0f} requests/s  "
              f"{median(r, 'cpu_per_req_us'):6.1f} µs CPU/request "
              f"(user {median(r, 'user_per_req_us'):4.1f} µs)")
    print(f"  tacho/wrk: throughput {median(t, 'rps') / median(w, 'rps'):.2f}×, "
          f"CPU per request "
          f"{median(t, 'cpu_per_req_us') / median(w, 'cpu_per_req_us'):.2f}×")
    if args.baseline:
        b = rows["before"]
        print(f"  before/wrk: throughput {median(b, 'rps') / median(w, 'rps'):.2f}×, "
              f"CPU per request "
              f"{median(b, 'cpu_per_req_us') / median(w, 'cpu_per_req_us'):.2f}×")


def timing(url, args):
    print("\ntacho's own timing error at a fixed rate (medians):")
    for rate in (1000, 5000, 10000, 20000):
        rs = [tacho(url, args.connections, args.duration, rate)
              for _ in range(args.rounds)]
        print(f"  {rate:6d} rps: achieved {median(rs, 'rps'):8.0f}, sent late p50 "
              f"{median(rs, 'lag_p50_us'):7.0f} µs, p99 {median(rs, 'lag_p99_us'):7.0f} µs, "
              f"{median(rs, 'cpu_per_req_us'):5.1f} µs CPU/request", flush=True)


if __name__ == "__main__":
    main()
