#!/usr/bin/env python3
"""How import and compare scale with the number of tests in a run.

Usage:
    cargo build --release && python3 benches/compare_scale.py [--tests 10000 200000] \
        [--baseline OLD_TACHO]
(TACHO_BIN=path/to/tacho for a binary elsewhere; --baseline runs the same steps with a
previous build, on the same files, in the same run, its rows marked "baseline".)

For each size N it writes two tacho.bench.v1 documents of N tests each, shaped like what
`tacho bench disk --json` prints (a read test with latency percentiles, three repeats, CPU
and device counters; about 1.6 KB of JSON per test), imports both into a private temporary
database and compares them, timing each step and reading its peak memory (the children's
maximum resident set from getrusage, measured in a fresh helper process per step so one
step's peak does not hide the next). Targets (docs/benchmarks.md, issue 38): compare of two
runs of 200,000 tests under 5 s and 500 MB, and `runs import` of one such file under 5 s.
Nothing here is a pass/fail test: machines are noisy.
"""

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TACHO = os.environ.get("TACHO_BIN", os.path.join(ROOT, "target", "release", "tacho"))


def figures(rng, iops):
    lat = 1e9 / iops
    return {
        "iops": iops,
        "bw_bytes_per_s": iops * 4096,
        "ios": int(iops * 5),
        "bytes": int(iops * 5) * 4096,
        "lat_ns": {
            "mean": round(lat),
            "p50": round(lat * 0.9),
            "p90": round(lat * 1.3),
            "p99": round(lat * 2.1),
            "p99_9": round(lat * 3.0),
            "p99_99": round(lat * 4.2),
            "max": round(lat * 6.0),
        },
    }


def test(rng, i, scale):
    # Each test does different work (its queue depth and job count), so compare matches test i
    # with test i.
    qd, jobs = 1 + i % 256, 1 + i // 256
    iops = rng.uniform(9000, 11000) * scale
    repeats = [{"runtime_s": 5.0, "read": figures(rng, iops * rng.uniform(0.97, 1.03))}
               for _ in range(3)]
    return {
        "name": f"RND4K Q{qd}T{jobs} read",
        "rw": "randread", "bs_bytes": 4096, "iodepth": qd, "numjobs": jobs,
        "direct": True, "engine": "io_uring", "runtime_s": 5.0, "ramp_s": 1.0,
        "read": figures(rng, iops),
        "cpu": {"user_s": 0.1, "sys_s": 0.8},
        "spread_pct": 3.1,
        "repeats": repeats,
        "timeline": [],
        "issued": {"read_bytes": int(iops * 5) * 4096, "write_bytes": 0},
        "device": [{"name": "vda", "reads": int(iops * 5), "read_bytes": int(iops * 5) * 4096,
                    "writes": 0, "write_bytes": 0, "flushes": 0, "read_ms": 11699,
                    "write_ms": 0, "io_ms": 612, "discards": 0, "discard_bytes": 0}],
        "warnings": [],
    }


def document(n, seed, scale, path):
    rng = random.Random(seed)
    head = {
        "schema": "tacho.bench.v1", "tool_version": "0.1.0",
        "host": {"hostname": "bench", "kernel": "6.18"},
        "target": {"path": "/srv", "kind": "file"},
        "suite": {"name": "scale", "version": 1},
    }
    with open(path, "w") as f:
        # Written test by test: a 200,000-test document is never held whole in this script.
        f.write(json.dumps(head)[:-1] + ', "tests": [')
        for i in range(n):
            f.write(("," if i else "") + json.dumps(test(rng, i, scale)))
        f.write('], "warnings": [], "interrupted": false}\n')


def measured(cmd):
    """Wall time, CPU time (user + system) and peak RSS in MiB of `cmd`, run under a fresh
    Python so RUSAGE_CHILDREN is its alone. CPU time is the steadier figure on a shared
    machine, where wall time includes waiting for a core."""
    probe = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
        "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(time.perf_counter() - t, u.ru_utime + u.ru_stime, u.ru_maxrss)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, *cmd], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {done.stderr}")
    out = done.stdout.split()
    return float(out[0]), float(out[1]), int(out[2]) / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tests", type=int, nargs="+", default=[10_000, 200_000])
    ap.add_argument("--baseline", help="a previous tacho build, measured beside this one")
    args = ap.parse_args()
    builds = [("this", TACHO)] + ([("baseline", args.baseline)] if args.baseline else [])
    print(f"{'build':>8} {'tests':>8} {'file MB':>8} {'import s':>9} {'cpu s':>6} {'MiB':>6} "
          f"{'compare s':>10} {'cpu s':>6} {'MiB':>6}")
    for n in args.tests:
        with tempfile.TemporaryDirectory() as tmp:
            a, b = os.path.join(tmp, "a.json"), os.path.join(tmp, "b.json")
            document(n, 1, 1.0, a)
            document(n, 2, 0.9, b)
            size = os.path.getsize(a) / 1e6
            for name, tacho in builds:
                db = os.path.join(tmp, f"{name}.db")
                imp = measured([tacho, "runs", "import", a, "--db", db])
                measured([tacho, "runs", "import", b, "--db", db])
                cmp_ = measured([tacho, "compare", "1", "2", "--db", db])
                print(f"{name:>8} {n:>8} {size:>8.1f} {imp[0]:>9.2f} {imp[1]:>6.2f} "
                      f"{imp[2]:>6.0f} {cmp_[0]:>10.2f} {cmp_[1]:>6.2f} {cmp_[2]:>6.0f}",
                      flush=True)
                os.remove(db)


if __name__ == "__main__":
    main()
