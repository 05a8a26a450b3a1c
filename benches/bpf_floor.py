#!/usr/bin/env python3
"""The floor under tacho's block tracer: what merely calling a BPF program on its two
tracepoints (block_io_start, block_rq_complete) costs the same fio workload as
benches/bpf_vs_bcc.py (4 KiB random reads, io_uring depth 32, loop device over /dev/shm),
against tacho top --latency doing its work there. ROUNDS rounds, order rotating:

  alone   fio with nothing attached
  empty   two programs that return at once (benches/bpf_floor/empty.bpf.c), attached by a
          throwaway aya loader (benches/bpf_floor/)
  tacho   tacho top --latency --json --interval 1

Prints each round's IOPS and the median loss of each against `alone`. The difference between
`empty` and `alone` is what no program on these tracepoints can avoid on this machine.

Usage (root; clang-14 and libbpf-dev for the object, cargo for the loader):
  cargo build --release && python3 benches/bpf_floor.py [--rounds 10] [--runtime 3]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bpf_vs_bcc import ROOT, TACHO, fio  # noqa: E402

HERE = os.path.join(ROOT, "benches", "bpf_floor")


def build(scratch):
    obj = os.path.join(scratch, "empty.bpf.o")
    subprocess.run(["clang-14", "-target", "bpf", "-O2", "-g", "-D__TARGET_ARCH_x86",
                    "-I/usr/include/x86_64-linux-gnu", "-c", os.path.join(HERE, "empty.bpf.c"),
                    "-o", obj], check=True)
    target = os.path.join(scratch, "target")
    subprocess.run(["cargo", "build", "--release", "-q", "--manifest-path",
                    os.path.join(HERE, "Cargo.toml"), "--target-dir", target], check=True)
    return obj, os.path.join(target, "release", "bpf-floor")


def attached(cmd, ready):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    while True:
        line = p.stdout.readline()
        if not line or ready(line):
            return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--runtime", type=int, default=3)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: eBPF and loop devices need it")
    with tempfile.TemporaryDirectory() as scratch:
        obj, loader = build(scratch)
        watchers = {
            "alone": None,
            "empty": lambda: attached([loader, obj, "io_start:block_io_start",
                                       "rq_complete:block_rq_complete"], lambda l: "ready" in l),
            "tacho": lambda: attached([TACHO, "top", "--latency", "--json", "--interval", "1"],
                                      lambda l: l.startswith("{")),
        }
        with tempfile.NamedTemporaryFile(dir="/dev/shm", prefix="tacho-floor-") as img:
            img.truncate(1 << 30)
            dev = subprocess.run(["losetup", "--find", "--show", "--direct-io=on", img.name],
                                 capture_output=True, text=True, check=True).stdout.strip()
            try:
                iops = {name: [] for name in watchers}
                names = list(watchers)
                for r in range(a.rounds):
                    order = names[r % len(names):] + names[:r % len(names)]
                    for name in order:
                        p = watchers[name]() if watchers[name] else None
                        iops[name].append(fio(dev, a.runtime)["iops"])
                        if p:
                            p.terminate()
                            p.wait(timeout=10)
                    print(f"round {r + 1}: " + ", ".join(f"{n} {iops[n][-1]:,.0f}" for n in names),
                          flush=True)
            finally:
                subprocess.run(["losetup", "-d", dev], check=False)
    for name in ("empty", "tacho"):
        losses = [100 * (1 - x / b) for x, b in zip(iops[name], iops["alone"])]
        print(f"{name}: median IOPS lost {statistics.median(losses):.1f}% "
              f"(range {min(losses):.1f}..{max(losses):.1f}) over {a.rounds} rounds")


if __name__ == "__main__":
    main()
