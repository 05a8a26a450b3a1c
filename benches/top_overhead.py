#!/usr/bin/env python3
"""tacho top against pidstat -d -u and iotop-c -b: CPU time per sample with ~1000 processes.

Usage (root, so every tool sees every process's I/O; needs sysstat and iotop-c):
    cargo build --release && sudo python3 benches/top_overhead.py [--procs 1000] [--samples 10]
        [--interval 1] [--rounds 3] [--baseline OLD-TACHO]

Spawns --procs sleeping processes, then runs each tool for --samples reports at --interval
seconds, alternating the tools for --rounds rounds so machine drift hits all alike. CPU time
is user+sys of the tool's process (os.wait4's rusage), divided by the reports it printed.
Each tool reads every process's stat and io files once per report:
  tacho   tacho top --batch --interval I --count N   (also --json, --json --accumulate)
  pidstat pidstat -d -u I N                          (reads /proc/PID/stat and io)
  iotop-c iotop-c -b -o -n N -d I                    (taskstats over netlink per thread)
Nothing here is a pass/fail test: machines are noisy.
"""

import argparse
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TACHO = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "tacho")


def cpu_seconds(cmd):
    """Runs cmd to completion with its output discarded; returns user+sys CPU seconds."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    # tacho exits 1 when it found something; that is a result, not a failure.
    if code not in (0, 1):
        sys.exit(f"{cmd[0]} failed with exit code {code}")
    return usage.ru_utime + usage.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--interval", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", help="another tacho binary (e.g. a build of main) to run "
                    "as `top --json` beside this one, for a before/after in the same run")
    args = ap.parse_args()
    n, i = str(args.samples), str(args.interval)
    tools = {
        "tacho top --batch": [TACHO, "top", "--batch", "--interval", f"{i}s", "--count", n],
        "tacho top --json": [TACHO, "top", "--json", "--interval", f"{i}s", "--count", n],
        "tacho top --json -a": [TACHO, "top", "--json", "--accumulate", "--interval", f"{i}s",
                                "--count", n],
        # As root, top loads its eBPF tracer at start (about 50 ms of CPU, once).
        "tacho --json --no-ebpf": [TACHO, "top", "--json", "--no-ebpf", "--interval", f"{i}s",
                                   "--count", n],
        **({"baseline top --json": [args.baseline, "top", "--json", "--interval", f"{i}s",
                                    "--count", n]} if args.baseline else {}),
        "pidstat -d -u": ["pidstat", "-d", "-u", i, n],
        "iotop-c -b": ["iotop-c", "-b", "-o", "-n", n, "-d", i],
    }
    sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(args.procs)]
    try:
        total = len([d for d in os.listdir("/proc") if d.isdigit()])
        print(f"{args.procs} sleepers spawned, {total} processes in all; "
              f"{args.samples} reports at {args.interval} s, {args.rounds} rounds")
        per_sample = {name: [] for name in tools}
        for _ in range(args.rounds):
            for name, cmd in tools.items():
                per_sample[name].append(cpu_seconds(cmd) / args.samples * 1000)
        ref = statistics.median(per_sample["pidstat -d -u"])
        ref2 = statistics.median(per_sample["iotop-c -b"])
        print(f"{'tool':<20}{'CPU ms/sample':>15}{'vs pidstat':>12}{'vs iotop-c':>12}")
        for name, values in per_sample.items():
            m = statistics.median(values)
            print(f"{name:<20}{m:>15.2f}{m / ref:>12.3f}{m / ref2:>12.3f}")
    finally:
        for p in sleepers:
            p.kill()
        for p in sleepers:
            p.wait()


if __name__ == "__main__":
    main()
