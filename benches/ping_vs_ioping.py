#!/usr/bin/env python3
"""tacho ping next to Debian's ioping on the same target, same request size and count.

Usage (root, for the loop device):
    cargo build --release && sudo python3 benches/ping_vs_ioping.py [--rounds 5] [--count 200]

Targets: a 256 MiB file on the filesystem holding this repository (the real disk), and a
loop device over a file in /dev/shm (RAM: what is left is each tool's own overhead). Both
tools read 4 KiB at random offsets of the whole target with O_DIRECT (ioping -D), one request
at a time with no pause (-i 0), the first request a warm-up. Rounds alternate tacho, ioping so
drift hits both; prints each tool's median over rounds of the average and minimum request
time, and tacho's difference from ioping. Not a pass/fail test.
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tacho_ping(tacho, target, count):
    out = subprocess.run([tacho, "ping", "-c", str(count), "-i", "0", "--json", target],
                         check=True, capture_output=True, text=True).stdout
    s = json.loads(out)["summary"]
    return s["avg_ns"], s["min_ns"]


def ioping(target, count):
    # -B: raw statistics; fields 5 and 6 are min and avg request time in ns.
    out = subprocess.run(["ioping", "-D", "-B", "-q", "-c", str(count), "-i", "0", target],
                         check=True, capture_output=True, text=True).stdout.split()
    return int(out[5]), int(out[4])


def compare(name, tacho, target, rounds, count):
    t_avg, t_min, i_avg, i_min = [], [], [], []
    for _ in range(rounds):
        a, m = tacho_ping(tacho, target, count)
        t_avg.append(a)
        t_min.append(m)
        a, m = ioping(target, count)
        i_avg.append(a)
        i_min.append(m)
    ta, tm = statistics.median(t_avg), statistics.median(t_min)
    ia, im = statistics.median(i_avg), statistics.median(i_min)
    print(f"{name:<22} avg tacho {ta / 1e3:8.1f} µs  ioping {ia / 1e3:8.1f} µs  "
          f"({(ta - ia) / ia * 100:+.1f}%)   min tacho {tm / 1e3:7.1f} µs  "
          f"ioping {im / 1e3:7.1f} µs ({(tm - im) / im * 100:+.1f}%)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--tacho", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "tacho"))
    args = ap.parse_args()
    print(f"{args.rounds} rounds of {args.count} requests, 4 KiB random O_DIRECT reads")
    with tempfile.NamedTemporaryFile(dir=ROOT, prefix=".ping-bench-") as disk:
        block = os.urandom(1 << 20)
        for _ in range(256):
            disk.write(block)
        disk.flush()
        os.fsync(disk.fileno())
        compare("file on the real disk", args.tacho, disk.name, args.rounds, args.count)
    with tempfile.NamedTemporaryFile(dir="/dev/shm", prefix="ping-bench-") as ram:
        ram.truncate(256 << 20)
        loop = subprocess.run(["losetup", "-f", "--show", ram.name], check=True,
                              capture_output=True, text=True).stdout.strip()
        try:
            compare("loop device in RAM", args.tacho, loop, args.rounds, args.count)
        finally:
            subprocess.run(["losetup", "-d", loop], check=False)


if __name__ == "__main__":
    main()
