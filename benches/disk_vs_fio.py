#!/usr/bin/env python3
"""tacho bench disk against fio on the same work, in one run; prints the ratios.

Usage (root; needs fio and losetup):
    cargo build --release && sudo python3 benches/disk_vs_fio.py [--rounds 3] [--dir /var/tmp]

Two parts, as issue 2 asks:
  loop   a loop device over a file in /dev/shm, 4k randread QD32 5 s: IOPS, p99 and CPU time
         per I/O (user+sys of the benchmarking process over the measured window).
  disk   a 1 GiB file on the real filesystem (--dir): randread 4k QD32, read 1M QD32,
         randwrite 4k QD128, and write 2300 B + fdatasync (sync engine, buffered, etcd's test).
Each case alternates tacho and fio for --rounds rounds and compares medians, so drift of
the machine hits both tools alike. Nothing here is a pass/fail test: machines are noisy.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TACHO = os.path.join(ROOT, "target", "release", "tacho")

# name, rw, bs, iodepth, engine, direct, sync_every
DISK_CASES = [
    ("randread 4k QD32", "randread", "4k", 32, "io_uring", True, None),
    ("read 1M QD32", "read", "1M", 32, "io_uring", True, None),
    ("randwrite 4k QD128", "randwrite", "4k", 128, "io_uring", True, None),
    ("write 2300B+fdatasync", "write", "2300", 1, "sync", False, 1),
]


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out[out.index("{"):])


def tacho(target, rw, bs, qd, engine, direct, sync, runtime, size):
    cmd = [TACHO, "bench", "disk", target, "--rw", rw, "--bs", bs, "--iodepth", str(qd),
           "--engine", engine, "--runtime", f"{runtime}s", "--size", size, "--json",
           "--direct" if direct else "--buffered", "--no-save"]
    if sync:
        cmd += ["--fdatasync", str(sync)]
    if rw in ("write", "randwrite", "rw", "randrw"):
        cmd.append("--destroy-data")  # the target is the scratch file this script made
    t = run_json(cmd)["tests"][0]
    d = t.get("read") or t.get("write")
    ios = d["ios"]
    return {
        "iops": d["iops"],
        "bw": d["bw_bytes_per_s"],
        "p99": d["lat_ns"]["p99"],
        "sync_p99": t["sync"]["lat_ns"]["p99"] if t.get("sync") else None,
        "cpu_per_io_us": (t["cpu"]["user_s"] + t["cpu"]["sys_s"]) / ios * 1e6,
    }


def fio(target, rw, bs, qd, engine, direct, sync, runtime, size):
    cmd = ["fio", "--name=cmp", f"--filename={target}", f"--rw={rw}", f"--bs={bs}",
           f"--iodepth={qd}", f"--ioengine={engine}", f"--direct={1 if direct else 0}",
           f"--runtime={runtime}", "--time_based", f"--size={size}", "--output-format=json"]
    if sync:
        cmd.append(f"--fdatasync={sync}")
    job = run_json(cmd)["jobs"][0]
    d = job["read"] if job["read"]["total_ios"] else job["write"]
    secs = job["job_runtime"] / 1000
    sync_p99 = None
    if sync:
        sync_p99 = job["sync"]["lat_ns"]["percentile"]["99.000000"]
    return {
        "iops": d["iops"],
        "bw": d["bw_bytes"],
        "p99": d["clat_ns"]["percentile"]["99.000000"],
        "sync_p99": sync_p99,
        "cpu_per_io_us": (job["usr_cpu"] + job["sys_cpu"]) / 100 * secs / d["total_ios"] * 1e6,
    }


def compare(label, case_args, rounds):
    runs = {"tacho": [], "fio": []}
    for _ in range(rounds):
        runs["tacho"].append(tacho(*case_args))
        runs["fio"].append(fio(*case_args))
    med = {tool: {k: statistics.median(r[k] for r in rs) if rs[0][k] is not None else None
                  for k in rs[0]} for tool, rs in runs.items()}
    rows = []
    for key, unit, scale in [("iops", "IOPS", 1), ("bw", "MiB/s", 1 / 2**20),
                             ("p99", "p99 µs", 1e-3), ("sync_p99", "fdatasync p99 µs", 1e-3),
                             ("cpu_per_io_us", "CPU µs/IO", 1)]:
        t, f = med["tacho"][key], med["fio"][key]
        if t is None or f is None:
            continue
        rows.append((label, unit, t * scale, f * scale, t / f if f else float("nan")))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runtime", type=int, default=5, help="seconds per run")
    ap.add_argument("--dir", default="/var/tmp", help="directory on the disk to test")
    ap.add_argument("--only", choices=["loop", "disk"])
    args = ap.parse_args()
    if not os.path.exists(TACHO):
        sys.exit(f"build first: cargo build --release ({TACHO} missing)")
    rows = []
    if args.only in (None, "loop"):
        img = tempfile.NamedTemporaryFile(dir="/dev/shm", suffix=".img", delete=False).name
        os.truncate(img, 1 << 30)
        loop = subprocess.run(["losetup", "-f", "--show", img], check=True,
                              capture_output=True, text=True).stdout.strip()
        try:
            rows += compare("loop: randread 4k QD32",
                            (loop, "randread", "4k", 32, "io_uring", True, None,
                             args.runtime, "1G"), args.rounds)
        finally:
            subprocess.run(["losetup", "-d", loop], check=False)
            os.unlink(img)
    if args.only in (None, "disk"):
        fd, path = tempfile.mkstemp(dir=args.dir, prefix="tacho-vs-fio.")
        os.close(fd)
        try:
            # One fully written file both tools share: reads hit real blocks, not holes.
            subprocess.run(["fio", "--name=prep", f"--filename={path}", "--size=1G",
                            "--rw=write", "--bs=1M", "--direct=1", "--output-format=terse"],
                           check=True, capture_output=True)
            for label, rw, bs, qd, engine, direct, sync in DISK_CASES:
                size = "22M" if sync else "1G"
                rows += compare(f"disk: {label}",
                                (path, rw, bs, qd, engine, direct, sync, args.runtime, size),
                                args.rounds)
        finally:
            os.unlink(path)
    print(f"{'case':<34} {'metric':<18} {'tacho':>12} {'fio':>12} {'tacho/fio':>10}")
    for label, unit, t, f, ratio in rows:
        print(f"{label:<34} {unit:<18} {t:>12.1f} {f:>12.1f} {ratio:>10.3f}")


if __name__ == "__main__":
    main()
