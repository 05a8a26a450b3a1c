#!/usr/bin/env python3
"""What ending a run's leftovers costs `tacho time`: the same `-N true` runs timed by this
build as it is (each run's process group signalled, orphans adopted and checked for) and with
`--keep-children` (none of that), and optionally by another build (`--base`, e.g. one built
from an older commit).

Usage:
    cargo build && python3 benches/time_leftovers.py [--rounds 7] [--runs 300] [--base BIN]

Per variant: the median run time tacho reports (its spawn-and-wait path is inside it) and the
whole process's wall time divided by the runs (the end-of-run work is in this one). Variants
alternate their order each round; figures are medians over the rounds. Not a pass/fail test.
"""

import argparse
import json
import os
import statistics
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--profile", default="debug")
    ap.add_argument("--base", help="another tacho binary to compare with")
    args = ap.parse_args()
    tacho = os.path.join(TARGET, args.profile, "tacho")
    variants = {"this build": [tacho], "this build --keep-children": [tacho, "--keep-children"]}
    if args.base:
        variants["base"] = [args.base]
    figures = {name: ([], []) for name in variants}
    for r in range(args.rounds):
        order = list(variants.items())
        for name, (binary, *extra) in order if r % 2 == 0 else reversed(order):
            cmd = [binary, "time", "-N", "--runs", str(args.runs), "true", "--json", "--no-save"]
            t0 = time.perf_counter()
            out = subprocess.run(cmd + extra, check=True, capture_output=True, text=True).stdout
            wall = time.perf_counter() - t0
            figures[name][0].append(json.loads(out)["results"][0]["median"] * 1e6)
            figures[name][1].append(wall / args.runs * 1e6)
    for name, (median, wall) in figures.items():
        print(f"{name:28s} reported median {statistics.median(median):7.1f} µs   "
              f"wall per run {statistics.median(wall):7.1f} µs")


if __name__ == "__main__":
    main()
