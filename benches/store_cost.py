#!/usr/bin/env python3
"""What keeping results costs: time per saved run, database size per run, how long list,
show and compare take on a store holding many runs, and concurrent writers.

Usage:
    cargo build --release && python3 benches/store_cost.py [--runs 200] [--writers 4]
(TACHO_BIN=path/to/tacho for a binary elsewhere.)

Every figure comes from the release binary in a private temporary database; nothing touches
the real results store. There is no reference tool to hold this against (admins keep results
in spreadsheets), so the figures stand alone: saving must stay invisible next to a test that
runs for seconds. Nothing here is a pass/fail test: machines are noisy.
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TACHO = os.environ.get("TACHO_BIN", os.path.join(ROOT, "target", "release", "tacho"))
FIO = os.path.join(ROOT, "tests", "fixtures", "fio", "three-jobs.json")


def timed(cmd):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return (time.perf_counter() - start) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--writers", type=int, default=4)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "t.db")
        base = ["--db", db]
        # A real tacho run (quick suite, tiny) as the document to import: 7 tests.
        bench = subprocess.run(
            [TACHO, "bench", "disk", tmp, "--suite", "quick", "--size", "16M",
             "--runtime", "200ms", "--ramp", "0", "--json", "--no-save"],
            check=True, capture_output=True, text=True).stdout
        doc = os.path.join(tmp, "quick.json")
        with open(doc, "w") as f:
            f.write(bench)

        empty = [timed([TACHO, "runs", "list", *base]) for _ in range(20)]
        imports = [timed([TACHO, "runs", "import", doc, *base]) for _ in range(args.runs)]
        size = os.path.getsize(db)
        listing = [timed([TACHO, "runs", "list", *base]) for _ in range(20)]
        show = [timed([TACHO, "runs", "show", "1", *base]) for _ in range(20)]
        compare = [timed([TACHO, "compare", "1", str(args.runs), *base]) for _ in range(20)]
        html = os.path.join(tmp, "r.html")
        report = [timed([TACHO, "compare", "1", "2", "3", "4", "--html", html, *base])
                  for _ in range(20)]

        # Concurrent writers: each imports the same document repeatedly, one process per run.
        cdb = os.path.join(tmp, "c.db")
        per = max(1, args.runs // args.writers)
        script = "\n".join(f"{TACHO} runs import {doc} --db {cdb} >/dev/null || exit 1"
                           for _ in range(per))
        start = time.perf_counter()
        procs = [subprocess.Popen(["sh", "-c", script]) for _ in range(args.writers)]
        codes = [p.wait() for p in procs]
        wall = time.perf_counter() - start
        stored = json.loads(subprocess.run([TACHO, "runs", "list", "--json", "--db", cdb],
                                           check=True, capture_output=True, text=True).stdout)

    med = statistics.median
    tests = len(json.loads(bench)["tests"])
    print(f"document: quick suite, {tests} tests, {len(bench)} bytes of JSON")
    print(f"process start, no database file yet (runs list): {med(empty):.1f} ms")
    print(f"runs import of one run ({tests} tests), median of {args.runs}: {med(imports):.1f} ms"
          f" (first {imports[0]:.1f} ms creates the file)")
    print(f"  => opening the store and saving cost about {med(imports) - med(empty):.1f} ms per run"
          f" ({(med(imports) - med(empty)) / tests:.2f} ms per test) beyond starting tacho")
    print(f"database size after {args.runs} runs: {size / 1024:.0f} KiB"
          f" = {size / args.runs / 1024:.1f} KiB per run")
    print(f"with {args.runs} runs stored: runs list {med(listing):.1f} ms, runs show "
          f"{med(show):.1f} ms, compare 2 runs {med(compare):.1f} ms, "
          f"compare 4 runs --html {med(report):.1f} ms")
    print(f"{args.writers} concurrent writers x {per} imports: {wall:.2f} s, exit codes {codes},"
          f" {len(stored['runs'])} of {args.writers * per} runs stored")


if __name__ == "__main__":
    main()
