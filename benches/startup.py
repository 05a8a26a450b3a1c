#!/usr/bin/env python3
"""Start-up cost of short commands: wall and CPU time of each, run many times in rotation.

Usage (root for `top`'s tracer, as people run it):
    cargo build --release && sudo python3 benches/startup.py [--runs 21] [--baseline OLD_TACHO]

Commands timed (each with its output thrown away):
  version    tacho --version: the process's floor (load, clap, exit), no work at all
  print-fio  tacho bench disk /dev/null --print-fio: parses options and prints, no I/O
  check      tacho check: the host checks
  top        tacho top --count 1 --json: one sample (its work includes the 1 s interval)
  top-noebpf the same with --no-ebpf: top without loading its block tracer
  top-fresh  top with TACHO_BPF_PIN=0 (with --bpffs): the tracer loaded anew, never reused
With --bpffs the runs have a bpffs at /sys/fs/bpf of their own (benches/kept_bpf.py), so `top`
keeps its tracer loaded between runs as on a systemd machine: the first run loads and pins it,
the others reuse it.
Every round runs each command once (each binary, with --baseline) in a rotating order, so
drift of the machine hits them alike; the table shows medians and the spread (p10..p90) of
wall time and of user+system CPU of the child. "beyond version" is a command's median minus
the floor's: what the command costs on top of merely starting. Nothing here is a pass/fail
test: machines are noisy.
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

import kept_bpf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TACHO = os.path.join(ROOT, "target", "release", "tacho")

COMMANDS = {
    "version": ["--version"],
    "print-fio": ["bench", "disk", "/dev/null", "--print-fio"],
    "check": ["check"],
    "top": ["top", "--count", "1", "--json"],
    "top-noebpf": ["top", "--count", "1", "--json", "--no-ebpf"],
    "top-fresh": ["top", "--count", "1", "--json"],
}

# Environment added per command.
ENV = {"top-fresh": kept_bpf.FRESH}


def timed(cmd, env=None):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                   env=kept_bpf.env(env))
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall * 1e3, cpu * 1e3


def spread(xs):
    xs = sorted(xs)
    return xs[len(xs) // 10], xs[(len(xs) * 9) // 10]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--baseline", metavar="OLD_TACHO", help="a previous build to run beside")
    ap.add_argument("--only", nargs="*", choices=list(COMMANDS), help="commands to time")
    ap.add_argument("--bpffs", action="store_true",
                    help="run with a bpffs of the bench's own, so top keeps its tracer loaded")
    args = ap.parse_args()
    if args.bpffs:
        kept_bpf.enter()
    if not os.path.exists(TACHO):
        sys.exit(f"build first: cargo build --release ({TACHO} missing)")
    binaries = {"tacho": TACHO}
    if args.baseline:
        binaries["baseline"] = args.baseline
    names = ["version"] + [c for c in (args.only or COMMANDS) if c != "version"]
    if not args.bpffs:
        names = [c for c in names if c != "top-fresh"]
    cases = [(b, c) for c in names for b in binaries]
    runs = {case: [] for case in cases}
    for i in range(args.runs):
        order = cases[i % len(cases):] + cases[:i % len(cases)]
        for b, c in order:
            runs[(b, c)].append(timed([binaries[b], *COMMANDS[c]], ENV.get(c)))
    print(f"{'command':<10} {'build':<9} {'wall ms':>8} {'p10..p90':>15} {'CPU ms':>7} "
          f"{'beyond version':>15}")
    for b, c in cases:
        walls = [w for w, _ in runs[(b, c)]]
        cpus = [u for _, u in runs[(b, c)]]
        floor = statistics.median(w for w, _ in runs[(b, "version")])
        lo, hi = spread(walls)
        print(f"{c:<10} {b:<9} {statistics.median(walls):>8.1f} {lo:>7.1f}..{hi:<7.1f} "
              f"{statistics.median(cpus):>7.1f} {statistics.median(walls) - floor:>15.1f}")


if __name__ == "__main__":
    main()
