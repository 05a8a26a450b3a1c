#!/usr/bin/env python3
"""tacho top --dns against dnstop on the same DNS traffic, and both against the truth.

Makes two network namespaces joined by a veth pair, runs the scripted resolver of
tests/helpers/dns_server.py in one and its client in the other (names answered NOERROR,
NXDOMAIN, SERVFAIL, or never), while `tacho top --dns --json` and `tcpdump -w` watch the
client's side; then reads the capture with `dnstop -R -l 2` (answers) and `dnstop -l 2`
(queries). Prints the three sets of counts side by side. Root; needs iproute2, tcpdump, dnstop.

    cargo build --release && python3 benches/dns_vs_dnstop.py [--good 2000] [--nx 300] ...
"""

import argparse
import json
import os
import re
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TACHO = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")),
                     "release", "tacho")
HELPERS = os.path.join(ROOT, "tests", "helpers")


def sh(*args):
    subprocess.run(args, check=True)


def in_ns(ns, *args, **kw):
    return subprocess.Popen(["ip", "netns", "exec", ns, *args], **kw)


def dnstop_table(text, title):
    """The rows of one dnstop table as {key: count}."""
    out, inside = {}, False
    for line in text.splitlines():
        if line.startswith(title):
            inside = True
            continue
        if inside:
            if not line.strip():
                if out:
                    break
                continue
            if line.startswith("-"):
                continue
            m = re.match(r"(\S+)\s+(\d+)\s", line)
            if m:
                out[m.group(1)] = int(m.group(2))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--good", type=int, default=2000)
    ap.add_argument("--nx", type=int, default=300)
    ap.add_argument("--fail", type=int, default=200)
    ap.add_argument("--drop", type=int, default=10)
    a = ap.parse_args()
    tag = f"dvd{os.getpid()}"
    na, nb = f"{tag}a", f"{tag}b"
    sh("ip", "netns", "add", na)
    sh("ip", "netns", "add", nb)
    procs = []
    try:
        sh("ip", "link", "add", "dva", "netns", na, "type", "veth", "peer", "name", "dvb",
           "netns", nb)
        for ns, dev, addr in ((na, "dva", "10.99.0.1"), (nb, "dvb", "10.99.0.2")):
            sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
        server = in_ns(nb, "python3", os.path.join(HELPERS, "dns_server.py"), "10.99.0.2",
                       stdout=subprocess.PIPE)
        procs.append(server)
        server.stdout.readline()  # "ready"
        with tempfile.TemporaryDirectory() as d:
            pcap = os.path.join(d, "dns.pcap")
            dump = in_ns(na, "tcpdump", "-i", "dva", "-w", pcap, "udp", "port", "53",
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(dump)
            duration = 10 + a.drop
            top = in_ns(na, TACHO, "top", "--dns", "--json", "--interval", "1s", "--count",
                        str(duration), stdout=subprocess.PIPE, text=True)
            procs.append(top)
            first = top.stdout.readline()
            start = time.time()
            client = subprocess.run(
                ["ip", "netns", "exec", na, "python3", os.path.join(HELPERS, "dns_client.py"),
                 "10.99.0.2", f"good.test:{a.good}", f"nx.test:{a.nx}", f"fail.test:{a.fail}",
                 f"drop.test:{a.drop}"], capture_output=True, text=True, check=True)
            took = time.time() - start
            rest = top.stdout.read()
            top.wait()
            time.sleep(0.5)
            dump.terminate()
            dump.wait()
            samples = [json.loads(l) for l in ([first] + rest.splitlines()) if l.strip()]
            answers = subprocess.run(["dnstop", "-R", "-l", "2", pcap], capture_output=True,
                                     text=True).stdout
            queries = subprocess.run(["dnstop", "-l", "2", pcap], capture_output=True,
                                     text=True).stdout
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        subprocess.run(["ip", "netns", "del", na])
        subprocess.run(["ip", "netns", "del", nb])

    def tacho_sum(field):
        out = {}
        for s in samples:
            for k, v in (s.get("dns") or {}).get(field, {}).items():
                out[k] = out.get(k, 0) + v
        return out

    rc = tacho_sum("rcodes")
    dq = dnstop_table(queries, "Query Type")
    dr = dnstop_table(answers, "Rcode")
    truth = {"queries": a.good + a.nx + a.fail + a.drop, "NOERROR": a.good, "NXDOMAIN": a.nx,
             "SERVFAIL": a.fail}
    rows = [
        ("queries", sum(tacho_sum("qtypes").values()), sum(dq.values())),
        ("NOERROR", rc.get("NOERROR", 0), dr.get("Noerror", 0)),
        ("NXDOMAIN", rc.get("NXDOMAIN", 0), dr.get("Nxdomain", 0)),
        ("SERVFAIL", rc.get("SERVFAIL", 0), dr.get("Servfail", 0)),
    ]
    print(f"client: {client.stdout.strip()} in {took:.1f} s")
    print(f"{'count':<10}{'resolver':>10}{'tacho':>10}{'dnstop':>10}")
    for name, t, d in rows:
        print(f"{name:<10}{truth[name]:>10}{t:>10}{d:>10}")
    unanswered = sum(s["dns"]["unanswered"] for s in samples if s.get("dns"))
    print(f"{'lost':<10}{a.drop:>10}{unanswered:>10}{'-':>10}")


if __name__ == "__main__":
    main()
