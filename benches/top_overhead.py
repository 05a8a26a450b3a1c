#!/usr/bin/env python3
"""tacho top against pidstat -d -u and iotop-c -b: CPU time per sample with ~1000 processes.

Usage (root, so every tool sees every process's I/O; needs sysstat and iotop-c):
    cargo build --release && sudo python3 benches/top_overhead.py [--procs 1000] [--samples 10]
        [--interval 1] [--rounds 3] [--baseline OLD-TACHO] [--steady] [--tools json,pidstat]

Spawns --procs sleeping processes, then runs each tool for --samples reports at --interval
seconds, alternating the tools for --rounds rounds so machine drift hits all alike. CPU time
is user+sys of the tool's process (os.wait4's rusage), divided by the reports it printed.
Each tool reads every process's stat and io files once per report:
  tacho   tacho top --batch --interval I --count N   (also --json, --json --accumulate)
  pidstat pidstat -d -u I N                          (reads /proc/PID/stat and io)
  iotop-c iotop-c -b -o -n N -d I                    (taskstats over netlink per thread)
With --steady each tool also runs for one report, and a second table gives the cost of each
further report, (CPU of N reports - CPU of one) / (N - 1): the steady state, without the
start-up (tacho's tracer load, pidstat's first read) that a short run pays once. --tools
runs only some tools (batch, json, accumulate, noebpf, fresh, baseline, pidstat, iotop).
With --bpffs the bench runs with a bpffs at /sys/fs/bpf of its own (benches/kept_bpf.py), so
tacho keeps its tracer loaded between runs as on a systemd machine; one `top --count 1` first
loads and pins it (its CPU is printed: what the first run of a boot pays), and the tool
`fresh` is `top --json` with TACHO_BPF_PIN=0, loading the tracer anew every run.
Nothing here is a pass/fail test: machines are noisy.
"""

import argparse
import os
import statistics
import subprocess
import sys

import kept_bpf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TACHO = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "tacho")


def cpu_seconds(cmd, env=None):
    """Runs cmd (with `env` added to the environment) to completion with its output
    discarded; returns user+sys CPU seconds."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=kept_bpf.env(env))
    _, status, usage = os.wait4(p.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    # tacho exits 1 when it found something; that is a result, not a failure.
    if code not in (0, 1):
        sys.exit(f"{cmd[0]} failed with exit code {code}")
    return usage.ru_utime + usage.ru_stime


def table(what, values):
    """Prints each tool's median of `values` and its ratio to pidstat's and iotop-c's."""
    refs = [(ref, statistics.median(values[name])) for ref, name in
            (("pidstat", "pidstat -d -u"), ("iotop-c", "iotop-c -b")) if name in values]
    print(f"{'tool':<24}{what:>15}" + "".join(f"{'vs ' + r:>12}" for r, _ in refs))
    for name, v in values.items():
        m = statistics.median(v)
        print(f"{name:<24}{m:>15.2f}" + "".join(f"{m / ref:>12.3f}" for _, ref in refs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--interval", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", help="another tacho binary (e.g. a build of main) to run "
                    "as `top --json` beside this one, for a before/after in the same run")
    ap.add_argument("--steady", action="store_true",
                    help="also run one report each and print the cost per further report")
    ap.add_argument("--tools", help="comma-separated subset of: batch, json, accumulate, "
                    "noebpf, fresh, baseline, pidstat, iotop")
    ap.add_argument("--bpffs", action="store_true",
                    help="run with a bpffs of the bench's own, so tacho keeps its tracer "
                    "loaded between runs (as where systemd mounts one)")
    args = ap.parse_args()
    if args.bpffs:
        kept_bpf.enter()
    i = str(args.interval)

    def tools_for(n):
        n = str(n)
        every = {
            "batch": ("tacho top --batch", [TACHO, "top", "--batch", "--interval", f"{i}s",
                                            "--count", n]),
            "json": ("tacho top --json", [TACHO, "top", "--json", "--interval", f"{i}s",
                                          "--count", n]),
            "accumulate": ("tacho top --json -a", [TACHO, "top", "--json", "--accumulate",
                                                   "--interval", f"{i}s", "--count", n]),
            # As root, top loads its eBPF tracer at start (tens of ms of CPU, once).
            "noebpf": ("tacho --json --no-ebpf", [TACHO, "top", "--json", "--no-ebpf",
                                                  "--interval", f"{i}s", "--count", n]),
            # The tracer loaded anew, as every run did before it was kept (--bpffs only).
            "fresh": ("tacho --json, loading", [TACHO, "top", "--json", "--interval",
                                                f"{i}s", "--count", n], kept_bpf.FRESH),
            "baseline": ("baseline top --json", [args.baseline, "top", "--json", "--interval",
                                                 f"{i}s", "--count", n]),
            "pidstat": ("pidstat -d -u", ["pidstat", "-d", "-u", i, n]),
            "iotop": ("iotop-c -b", ["iotop-c", "-b", "-o", "-n", n, "-d", i]),
        }
        wanted = args.tools.split(",") if args.tools else list(every)
        unknown = [w for w in wanted if w not in every]
        if unknown:
            ap.error(f"unknown tool {unknown[0]!r}: choose from {', '.join(every)}")
        if not args.baseline:
            wanted = [w for w in wanted if w != "baseline"]
        if not args.bpffs:
            wanted = [w for w in wanted if w != "fresh"]
        # name: (command, environment to add)
        return {every[w][0]: (every[w][1], every[w][2] if len(every[w]) > 2 else None)
                for w in wanted}

    tools = tools_for(args.samples)
    once = tools_for(1) if args.steady else {}
    sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(args.procs)]
    try:
        total = len([d for d in os.listdir("/proc") if d.isdigit()])
        print(f"{args.procs} sleepers spawned, {total} processes in all; "
              f"{args.samples} reports at {args.interval} s, {args.rounds} rounds")
        if args.bpffs:
            first = cpu_seconds([TACHO, "top", "--json", "--interval", "1s", "--count", "1"])
            print(f"first run of the bpffs (loads and pins the tracer): "
                  f"{first * 1000:.1f} ms CPU for one report")
        per_sample = {name: [] for name in tools}
        one = {name: [] for name in once}
        for _ in range(args.rounds):
            for name, (cmd, env) in tools.items():
                per_sample[name].append(cpu_seconds(cmd, env) / args.samples * 1000)
                if name in once:
                    one[name].append(cpu_seconds(*once[name]) * 1000)
        table("CPU ms/sample", per_sample)
        if args.steady and args.samples > 1:
            # Per round: N reports' CPU less one report's, over the N - 1 further reports.
            further = {name: [(v * args.samples - o) / (args.samples - 1)
                              for v, o in zip(per_sample[name], one[name])]
                       for name in per_sample}
            print(f"each report after the first ({args.samples - 1} of them):")
            table("CPU ms/report", further)
    finally:
        for p in sleepers:
            p.kill()
        for p in sleepers:
            p.wait()


if __name__ == "__main__":
    main()
