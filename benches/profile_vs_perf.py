#!/usr/bin/env python3
"""tacho profile against perf record on the same load: a C program (built here, frame
pointers) with three functions taking about 50%, 30% and 20% of its time, one copy per CPU,
profiled at 99 Hz on every CPU for DURATION seconds by `tacho profile --json` and by
`perf record -F 99 -a -g` (Debian's linux-perf), alternating order, ROUNDS rounds.

Prints each tool's CPU time (utime+stime of it and its children, the whole run including
perf's write-out or tacho's symbolization) as a share of one CPU over the profiled time, and
the top-10 functions by self share side by side (perf's shares recomputed over its non-idle
samples, as tacho's are), with the largest gap in points.

Usage (root): cargo build --release && python3 benches/profile_vs_perf.py [--rounds 3] [--duration 10]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TACHO = os.environ.get("TACHO_BIN", os.path.join(ROOT, "target", "release", "tacho"))

LOAD = r"""
#include <unistd.h>
volatile unsigned long sink;
__attribute__((noinline)) void heavy(void) { for (int i = 0; i < 5000; i++) sink++; }
__attribute__((noinline)) void middle(void) { for (int i = 0; i < 3000; i++) sink++; }
__attribute__((noinline)) void light(void) { for (int i = 0; i < 2000; i++) sink++; }
int main(void) { for (;;) { heavy(); middle(); light(); } }
"""


def run_timed(cmd):
    """Runs cmd to the end; returns (stdout, CPU seconds of it and its children, wall)."""
    before = os.times()
    start = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    if out.returncode != 0:
        sys.exit(f"{cmd[0]} failed: {out.stderr[-500:]}")
    return out.stdout, cpu, wall


def tacho(duration):
    out, cpu, wall = run_timed([TACHO, "profile", "--json", "--duration", f"{duration}s"])
    doc = json.loads(out)
    top = {f["name"]: f["self_pct"] for f in doc["functions"][:10]}
    return top, cpu


def perf(duration, tmp):
    data = os.path.join(tmp, "perf.data")
    _, cpu, _ = run_timed(["perf", "record", "-F", "99", "-a", "-g", "-o", data, "--",
                           "sleep", str(duration)])
    report = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "sym",
                             "--stdio", "-g", "none", "--percent-limit", "0"],
                            capture_output=True, text=True).stdout
    shares = {}
    for line in report.splitlines():
        m = re.match(r"\s+([\d.]+)%\s+\[[.k]\]\s+(\S+)", line)
        if m:
            shares[m.group(2)] = shares.get(m.group(2), 0) + float(m.group(1))
    idle = sum(v for k, v in shares.items() if re.search(r"idle|safe_halt|cpuidle", k))
    busy = 100 - idle
    top = sorted(((k, 100 * v / busy) for k, v in shares.items()
                  if not re.search(r"idle|safe_halt|cpuidle", k)), key=lambda kv: -kv[1])[:10]
    return dict(top), cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "load.c")
        open(src, "w").write(LOAD)
        binary = os.path.join(tmp, "load")
        subprocess.run(["cc", "-O1", "-fno-omit-frame-pointer", "-o", binary, src], check=True)
        loads = [subprocess.Popen([binary]) for _ in range(os.cpu_count())]
        try:
            time.sleep(1)
            for r in range(a.rounds):
                order = [("tacho", lambda: tacho(a.duration)), ("perf", lambda: perf(a.duration, tmp))]
                results = {}
                for name, fn in (order if r % 2 == 0 else order[::-1]):
                    results[name] = fn()
                (t_top, t_cpu), (p_top, p_cpu) = results["tacho"], results["perf"]
                print(f"round {r + 1}: CPU over {a.duration} s: tacho {t_cpu:.2f} s "
                      f"({100 * t_cpu / a.duration:.2f}% of a CPU), perf record+report "
                      f"{p_cpu:.2f} s ({100 * p_cpu / a.duration:.2f}%)")
                names = list(dict.fromkeys(list(t_top)[:10]))
                gaps = []
                for n in names:
                    t, p = t_top.get(n, 0.0), p_top.get(n)
                    gaps.append(abs(t - (p or 0.0)))
                    print(f"    {n:40} tacho {t:5.1f}%  perf {'-' if p is None else f'{p:5.1f}%'}")
                missing = [n for n in list(p_top)[:10] if n not in t_top]
                print(f"  largest gap {max(gaps):.1f} points; in perf's top 10 but not tacho's: "
                      f"{missing or 'none'}")
        finally:
            for l in loads:
                l.kill()


if __name__ == "__main__":
    main()
