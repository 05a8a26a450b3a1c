#!/usr/bin/env python3
"""tacho time against hyperfine on the same work (`-N true`), in one run; prints the ratios.

Usage:
    cargo build --release && python3 benches/time_vs_hyperfine.py [--rounds 7] [--runs 500]

Each round runs `tacho time -N --runs R true` and `hyperfine -N --runs R true`, alternating which
goes first, and records per tool:
  reported mean / median / min
                           what the tool says `true` took: its spawn-and-wait path is in it,
                           so a lower figure means less overhead in the measurement itself.
                           On a shared VM some runs take a whole scheduler tick (4 ms) for
                           either tool, in bursts; the mean follows those bursts, the median
                           and the minimum do not
  wall per run             the whole tool process's wall time divided by R
  own CPU per run          the tool's user+system CPU minus what it reports for its children
                           (getrusage(RUSAGE_CHILDREN) of this script around the tool), over R
Figures are medians over the rounds. Nothing here is a pass/fail test: machines are noisy.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TACHO = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")),
                     "release", "tacho")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(cmd, export, runs):
    cpu0, t0 = children_cpu(), time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    r = json.load(open(export))["results"][0]
    assert len(r["times"]) == runs, (cmd, len(r["times"]))
    reported_children_cpu = (r["user"] + r["system"]) * runs
    return {
        "mean_us": r["mean"] * 1e6,
        "median_us": r["median"] * 1e6,
        "min_us": r["min"] * 1e6,
        "wall_per_run_us": wall / runs * 1e6,
        "own_cpu_per_run_us": (cpu - reported_children_cpu) / runs * 1e6,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", type=int, default=500)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    out = {"tacho": [], "hyperfine": []}
    for i in range(args.rounds):
        tools = [
            ("tacho", [TACHO, "time", "-N", "--runs", str(args.runs), "true", "--no-save",
                       "--export-json", f"{tmp}/t.json"], f"{tmp}/t.json"),
            ("hyperfine", ["hyperfine", "-N", "--runs", str(args.runs), "--style", "none",
                           "true", "--export-json", f"{tmp}/h.json"], f"{tmp}/h.json"),
        ]
        if i % 2:
            tools.reverse()
        for name, cmd, export in tools:
            out[name].append(measure(cmd, export, args.runs))
    version = subprocess.run(["hyperfine", "--version"], capture_output=True,
                             text=True).stdout.strip()
    print(f"{version}; {args.rounds} rounds of {args.runs} runs of `true` with -N; medians")
    print(f"{'metric':<22}{'tacho':>12}{'hyperfine':>12}{'tacho/hf':>10}")
    for metric in ["mean_us", "median_us", "min_us", "wall_per_run_us", "own_cpu_per_run_us"]:
        t = statistics.median(r[metric] for r in out["tacho"])
        h = statistics.median(r[metric] for r in out["hyperfine"])
        print(f"{metric:<22}{t:>12.1f}{h:>12.1f}{t / h:>10.3f}")


if __name__ == "__main__":
    main()
