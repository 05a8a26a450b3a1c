#!/usr/bin/env python3
"""tacho top's TCP connections against iperf3's own reports, and the cost of a sample with
many connections against `ss -tin`.

Agreement: two network namespaces joined by a veth pair; iperf3 sends with -P 1, 8 and 64
streams (100 Mb/s in all, paced by -b, in 16 KiB writes) while `tacho top --json --top 70` watches the
sender's side. Per stream, the mean of tacho's tx_bytes_per_s over the steady samples is set
against iperf3's bytes sent / seconds for the same stream (matched by local port).

Cost: N idle loopback connections (a listener and N clients in this script), then the CPU
of `tacho top --json` per sample (median of 3 runs of 5 samples, minus the same with no extra
connections) and of one `ss -tin` run (median of 5).

    cargo build --release && python3 benches/net_conns.py [--conns 10000]
"""

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TACHO = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")),
                     "release", "tacho")


def sh(*args):
    subprocess.run(args, check=True)


def agreement(streams):
    tag = f"nc{os.getpid()}"
    na, nb = f"{tag}a", f"{tag}b"
    sh("ip", "netns", "add", na)
    sh("ip", "netns", "add", nb)
    server = None
    try:
        sh("ip", "link", "add", "nca", "netns", na, "type", "veth", "peer", "name", "ncb",
           "netns", nb)
        for ns, dev, addr in ((na, "nca", "10.99.0.1"), (nb, "ncb", "10.99.0.2")):
            sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
        server = subprocess.Popen(["ip", "netns", "exec", nb, "iperf3", "-s", "-B",
                                   "10.99.0.2"], stdout=subprocess.DEVNULL)
        time.sleep(0.5)
        per_stream = 100 / streams
        client = subprocess.Popen(
            ["ip", "netns", "exec", na, "iperf3", "-c", "10.99.0.2", "-P", str(streams),
             "-b", f"{per_stream:.3f}M", "-l", "16K", "-t", "10", "-J"],
            stdout=subprocess.PIPE, text=True)
        time.sleep(2)
        top = subprocess.run(
            ["ip", "netns", "exec", na, TACHO, "top", "--json", "--interval", "1s", "--count",
             "6", "--top", "70"], capture_output=True, text=True)
        report = json.loads(client.communicate()[0])
    finally:
        if server:
            server.kill()
            server.wait()
        subprocess.run(["ip", "netns", "del", na])
        subprocess.run(["ip", "netns", "del", nb])
    samples = [json.loads(l) for l in top.stdout.splitlines()][1:]
    ports = {c["socket"]: c["local_port"] for c in report["start"]["connected"]}
    iperf = {}
    for s in report["end"]["streams"]:
        snd = s["sender"]
        iperf[ports[snd["socket"]]] = snd["bytes"] / snd["seconds"]
    tacho = {}
    for s in samples:
        for c in s["connections"]["top"]:
            if c["remote"].endswith(":5201"):
                port = int(c["local"].rsplit(":", 1)[1])
                tacho.setdefault(port, []).append(c["tx_bytes_per_s"])
    diffs = []
    for port, rate in iperf.items():
        if port in tacho:
            mean = statistics.mean(tacho[port])
            diffs.append(abs(mean - rate) / rate * 100)
    any_port = next(iter(iperf))
    print(f"  ({streams} streams: e.g. port {any_port}: iperf3 {iperf[any_port]:.0f} B/s, "
          f"tacho {[round(x) for x in tacho.get(any_port, [])]})")
    return len(iperf), len(diffs), max(diffs), statistics.median(diffs)


def cpu_of(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(p.pid, 0)
    return usage.ru_utime + usage.ru_stime


CLIENTS = """
import resource, socket, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
conns = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(int(sys.argv[2]))]
print("connected", flush=True)
sys.stdin.read()
"""


def cost(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    top = [TACHO, "top", "--json", "--interval", "200ms", "--count", "5"]
    before = statistics.median(cpu_of(top) for _ in range(3)) / 6
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4096)
    # The clients live in another process: each side needs n descriptors.
    clients = subprocess.Popen(["python3", "-c", CLIENTS, str(listener.getsockname()[1]),
                                str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True)
    servers = [listener.accept()[0] for _ in range(n)]
    assert clients.stdout.readline().strip() == "connected"
    try:
        with_conns = statistics.median(cpu_of(top) for _ in range(3)) / 6
        ss = statistics.median(cpu_of(["ss", "-tin"]) for _ in range(5))
    finally:
        clients.stdin.close()
        clients.wait()
        for s in servers:
            s.close()
    return before, with_conns, ss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conns", type=int, default=10000)
    a = ap.parse_args()
    print(f"{'streams':>8}{'iperf3 streams':>16}{'matched':>9}{'max diff %':>12}{'median %':>10}")
    for streams in (1, 8, 64):
        total, matched, worst, median = agreement(streams)
        print(f"{streams:>8}{total:>16}{matched:>9}{worst:>12.2f}{median:>10.2f}")
    before, after, ss = cost(a.conns)
    n = 2 * a.conns
    print(f"\n{n} sockets ({a.conns} connections, both ends):")
    print(f"  tacho top CPU per sample: {before * 1000:.1f} ms without them, "
          f"{after * 1000:.1f} ms with them (+{(after - before) * 1000:.1f} ms)")
    print(f"  ss -tin CPU per run:      {ss * 1000:.1f} ms")


if __name__ == "__main__":
    main()
