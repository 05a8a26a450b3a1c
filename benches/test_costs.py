#!/usr/bin/env python3
"""What each test of a test binary costs: its wall time and CPU, each test run alone.

Usage (as root, as CI runs the tests; PostgreSQL up and TACHO_TEST_PG set as .ci/run does):
    cargo test --no-run   # prints the test binaries' paths
    python3 benches/test_costs.py target/debug/deps/it-HASH [--jobs 2] [--jsonl FILE] [--top 30]

Each test runs in a process of its own (`BINARY --exact NAME --test-threads 1`); its CPU is the
user and system time of that process and of the children it waited for (tacho, fio, python),
from wait4(2). The kernel's own work for it (loop devices, writeback) is not counted. `--jobs`
runs that many tests at once (their CPU figures stay their own; their wall times stretch with
the machine's load). The summary says how much of the tests' wall time was CPU: the share that
decides how many tests can run at once per CPU (.ci/run's RUST_TEST_THREADS). Nothing here is a
pass/fail test.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor


def tests(binary):
    listed = subprocess.run([binary, "--list"], capture_output=True, text=True, check=True)
    return [l[: -len(": test")] for l in listed.stdout.splitlines() if l.endswith(": test")]


def run_one(binary, name):
    env = dict(os.environ, CI="true")
    start = time.monotonic()
    child = subprocess.Popen(
        [binary, "--exact", name, "--test-threads", "1", "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    _, status, usage = os.wait4(child.pid, 0)
    return {
        "name": name,
        "wall_s": time.monotonic() - start,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "ok": os.waitstatus_to_exitcode(status) == 0,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("binary")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--jsonl", help="also write one JSON line per test here")
    p.add_argument("--top", type=int, default=30, help="tests listed, by wall time")
    a = p.parse_args()
    names = tests(a.binary)
    out = open(a.jsonl, "w") if a.jsonl else None
    results = []
    with ThreadPoolExecutor(a.jobs) as pool:
        for r in pool.map(lambda n: run_one(a.binary, n), names):
            results.append(r)
            if out:
                out.write(json.dumps(r) + "\n")
                out.flush()
    wall = sum(r["wall_s"] for r in results)
    cpu = sum(r["cpu_s"] for r in results)
    print(f"{len(results)} tests, {sum(not r['ok'] for r in results)} failed")
    print(f"wall {wall:.0f} s, CPU {cpu:.0f} s: {100 * cpu / max(wall, 1e-9):.0f}% of the wall time")
    print(f"{'wall s':>8} {'CPU s':>7}  test")
    for r in sorted(results, key=lambda r: -r["wall_s"])[: a.top]:
        flag = "" if r["ok"] else "  FAILED"
        print(f"{r['wall_s']:8.1f} {r['cpu_s']:7.1f}  {r['name']}{flag}")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
