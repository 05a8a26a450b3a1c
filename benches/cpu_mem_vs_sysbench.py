#!/usr/bin/env python3
"""tacho bench cpu / bench mem against sysbench on the same work, in one run; prints ratios.

Usage:
    cargo build --release && python3 benches/cpu_mem_vs_sysbench.py [--rounds 5]

mem  DRAM bandwidth, 1 thread and all threads, read and write, on a 1 GiB working set:
     `tacho bench mem --level dram --dram-size 1G` against
     `sysbench memory --memory-block-size=1G --memory-total-size=20G --memory-oper=read|write`
     (a 1 GiB block is far beyond any cache; sysbench's default 1 KiB block fits in L1).
     sysbench's default --memory-scope=global has all threads stream the same block, so one
     thread reads lines another has just brought into the shared L3; the ", local" rows give
     each sysbench thread its own block, as tacho's threads have.
cpu  the primes kernel (one op = one sysbench cpu event: primes up to 10000) against
     `sysbench cpu` events/s, 1 thread and all threads; and, from tacho's own run, every
     kernel's all-threads figure against threads x its single-thread figure.
levels  the default `tacho bench mem` (no sysbench counterpart): single-thread read bandwidth
     and latency per level, to see that L1, L2, L3 and DRAM come out distinct.
Before each cpu round the script waits (up to --idle-wait seconds) for a second in which the
machine's CPUs are at most 10% busy, since scaling can only be judged on idle cores; the busy
share it last saw is printed with the figures.
Each round alternates which tool goes first; figures are medians over the rounds. Nothing
here is a pass/fail test: machines are noisy.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TACHO = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")),
                     "release", "tacho")
MIB = 1 << 20


def tacho_json(*args):
    out = subprocess.run([TACHO, *args, "--json", "--no-save"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def sysbench(*args):
    out = subprocess.run(["sysbench", *args, "run"], check=True, capture_output=True,
                         text=True).stdout
    return out


def sysbench_mem(oper, threads, scope="global"):
    out = sysbench("memory", "--memory-block-size=1G", "--memory-total-size=20G",
                   f"--memory-oper={oper}", f"--threads={threads}", f"--memory-scope={scope}")
    return float(re.search(r"\(([\d.]+) MiB/sec\)", out).group(1))


def sysbench_cpu(threads):
    out = sysbench("cpu", f"--threads={threads}", "--time=2")
    return float(re.search(r"events per second:\s+([\d.]+)", out).group(1))


def busy_share(seconds=1.0):
    """Share of all CPUs' time spent busy over `seconds`, from /proc/stat."""
    def ticks():
        f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
        idle = f[3] + f[4]
        return sum(f[:8]) - idle, sum(f[:8])
    b0, t0 = ticks()
    time.sleep(seconds)
    b1, t1 = ticks()
    return (b1 - b0) / max(t1 - t0, 1)


def wait_idle(limit_s):
    """Waits for a quiet second; returns the busy share last seen."""
    deadline = time.time() + limit_s
    while True:
        busy = busy_share()
        if busy <= 0.10 or time.time() >= deadline:
            return busy


def tacho_mem():
    lvl = tacho_json("bench", "mem", "--level", "dram", "--dram-size", "1G", "--repeat", "1",
                     "--runtime", "500ms")["levels"][0]
    a = lvl["all_threads"]
    return {
        "read 1 thread": lvl["read_bytes_per_s"] / MIB,
        "write 1 thread": lvl["write_bytes_per_s"] / MIB,
        "read all threads": a["read_bytes_per_s"] / MIB,
        "write all threads": a["write_bytes_per_s"] / MIB,
        # tacho's threads always work on their own memory, as sysbench's local scope does.
        "read all threads, local": a["read_bytes_per_s"] / MIB,
        "write all threads, local": a["write_bytes_per_s"] / MIB,
        "threads": a["threads"],
    }


def sysbench_mems(threads):
    return {
        "read 1 thread": sysbench_mem("read", 1),
        "write 1 thread": sysbench_mem("write", 1),
        "read all threads": sysbench_mem("read", threads),
        "write all threads": sysbench_mem("write", threads),
        "read all threads, local": sysbench_mem("read", threads, "local"),
        "write all threads, local": sysbench_mem("write", threads, "local"),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--idle-wait", type=float, default=60.0)
    args = ap.parse_args()
    threads = os.cpu_count()
    mem = {"tacho": [], "sysbench": []}
    cpu = {"tacho": [], "sysbench": []}
    scaling = []
    levels = []
    busy_before = []
    for i in range(args.rounds):
        steps = [
            lambda: mem["tacho"].append(tacho_mem()),
            lambda: mem["sysbench"].append(sysbench_mems(threads)),
        ]
        if i % 2:
            steps.reverse()
        for step in steps:
            step()
        busy_before.append(wait_idle(args.idle_wait))
        v = tacho_json("bench", "cpu", "--repeat", "1", "--runtime", "1s")
        primes = lambda p: next(k["ops_per_s"] for k in v[p]["kernels"] if k["name"] == "primes")
        t = {"1 thread": primes("single_thread"), "all threads": primes("all_threads")}
        s = {"1 thread": sysbench_cpu(1), "all threads": sysbench_cpu(threads)}
        cpu["tacho"].append(t)
        cpu["sysbench"].append(s)
        n = v["all_threads"]["threads"]
        row = {"score": v["scaling"] / n}
        for one, allk in zip(v["single_thread"]["kernels"], v["all_threads"]["kernels"]):
            row[one["name"]] = allk["ops_per_s"] / (n * one["ops_per_s"])
        scaling.append(row)
        levels.append({l["name"]: l for l in tacho_json("bench", "mem")["levels"]})

    med = lambda rows, key: statistics.median(r[key] for r in rows)
    print(f"{args.rounds} rounds, {threads} threads for 'all'; medians")
    print(f"{'case':<40}{'tacho':>12}{'sysbench':>12}{'ratio':>8}")
    for key in ["read 1 thread", "write 1 thread", "read all threads", "write all threads",
                "read all threads, local", "write all threads, local"]:
        t, s = med(mem["tacho"], key), med(mem["sysbench"], key)
        print(f"{'DRAM ' + key + ' MiB/s':<40}{t:>12.0f}{s:>12.0f}{t / s:>8.3f}")
    for key in ["1 thread", "all threads"]:
        t, s = med(cpu["tacho"], key), med(cpu["sysbench"], key)
        print(f"{'primes events/s ' + key:<40}{t:>12.0f}{s:>12.0f}{t / s:>8.3f}")
    print()
    busy = ", ".join(f"{b * 100:.0f}%" for b in busy_before)
    print(f"all threads / (threads x 1 thread), tacho bench cpu (CPUs busy just before: {busy}):")
    for key in scaling[0]:
        print(f"  {key:<10}{med(scaling, key):>8.3f}")
    print()
    print("tacho bench mem (defaults), 1 thread:")
    print(f"  {'level':<6}{'set':>10}{'read GiB/s':>12}{'write GiB/s':>12}{'latency ns':>12}")
    for name, first in levels[0].items():
        rows = [r[name] for r in levels]
        read = statistics.median(r["read_bytes_per_s"] for r in rows) / (1 << 30)
        write = statistics.median(r["write_bytes_per_s"] for r in rows) / (1 << 30)
        lat = statistics.median(r["latency_ns"] for r in rows)
        size = first["size_bytes"] >> 10
        print(f"  {name:<6}{size:>8}Ki{read:>12.1f}{write:>12.1f}{lat:>12.1f}")


if __name__ == "__main__":
    main()
