#!/usr/bin/env python3
"""What tacho check, snapshot and diff cost, next to `sysctl -a` reading the same /proc/sys.

Usage:
    cargo build --release && python3 benches/check_cost.py [--runs 20] [--tacho PATH]

Each command runs --runs times, alternating with the reference so drift hits both; prints
median and minimum wall time and user+system CPU per run. `tacho snapshot` reads every
readable sysctl (as `sysctl -a` does) plus the kernel config, THP, devices, mounts and CPU
settings, so `sysctl -a` is the floor it is compared with. Not a pass/fail test.
"""

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_once(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--tacho", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "tacho"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        snap = os.path.join(tmp, "s.json")
        subprocess.run([args.tacho, "snapshot", "-o", snap], check=True,
                       stderr=subprocess.DEVNULL)
        cases = {
            "tacho check": [args.tacho, "check"],
            "tacho check --json": [args.tacho, "check", "--json"],
            "tacho snapshot": [args.tacho, "snapshot"],
            "tacho diff FILE live": [args.tacho, "diff", snap, "live"],
            "sysctl -a (reference)": ["sysctl", "-a"],
        }
        samples = {name: [] for name in cases}
        for _ in range(args.runs):
            for name, cmd in cases.items():
                samples[name].append(run_once(cmd))
    floor = statistics.median(w for w, _ in samples["sysctl -a (reference)"])
    print(f"{'command':<24} {'median ms':>10} {'min ms':>8} {'CPU ms':>8} {'x sysctl -a':>12}")
    for name, s in samples.items():
        walls = [w for w, _ in s]
        cpus = [c for _, c in s]
        med = statistics.median(walls)
        print(f"{name:<24} {med * 1e3:>10.1f} {min(walls) * 1e3:>8.1f} "
              f"{statistics.median(cpus) * 1e3:>8.1f} {med / floor:>12.2f}")


if __name__ == "__main__":
    main()
