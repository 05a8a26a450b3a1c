#!/usr/bin/env python3
"""tacho bench disk against fio on the same work, in one run; prints the ratios.

Usage (root; needs fio and losetup):
    cargo build --release && sudo python3 benches/disk_vs_fio.py [--rounds 3] [--dir /var/tmp]
        [--numjobs N] [--fio-best] [--fio-batch N] [--baseline OLD_TACHO]

Two parts, as issue 2 asks:
  loop   a loop device over a file in /dev/shm, 4k randread QD32 5 s: IOPS, p99 and CPU time
         per I/O (user+sys of the benchmarking process over the measured window).
  disk   a 1 GiB file on the real filesystem (--dir): randread 4k QD32, read 1M QD32,
         randwrite 4k QD128, and write 2300 B + fdatasync (sync engine, buffered, etcd's test).
Each case alternates tacho and fio for --rounds rounds and compares medians, so drift of
the machine hits both tools alike. Nothing here is a pass/fail test: machines are noisy.

  --numjobs N     N jobs (threads in tacho, processes in fio) on the same target; IOPS and
                  CPU are summed over the jobs.
  --fio-best      fio with its fastest flags for io_uring (--fixedbufs --registerfiles), which
                  tacho's engine uses by itself; fio's defaults otherwise.
  --fio-batch N   fio with --iodepth_batch_submit=N (tacho's io_uring engine hands the kernel
                  two I/Os per system call, and --print-fio says so); fio's default is 1.
                  At fio's default reaping fio still commits about one I/O per call
                  with it: count with perf stat -e syscalls:sys_enter_io_uring_enter.
  --baseline BIN  a previous tacho build, run in the same rotation: its row shows beside the
                  new one's, as a ratio to fio.
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


def tacho(target, rw, bs, qd, engine, direct, sync, runtime, size, numjobs=1, fio_best=False,
          fio_batch=None, binary=TACHO):
    del fio_best, fio_batch  # fio's options only: tacho's engine is what it is
    cmd = [binary, "bench", "disk", target, "--rw", rw, "--bs", bs, "--iodepth", str(qd),
           "--engine", engine, "--runtime", f"{runtime}s", "--size", size, "--json",
           "--direct" if direct else "--buffered", "--no-save"]
    if numjobs > 1:
        cmd += ["--numjobs", str(numjobs)]
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


def fio(target, rw, bs, qd, engine, direct, sync, runtime, size, numjobs=1, fio_best=False,
        fio_batch=None):
    cmd = ["fio", "--name=cmp", f"--filename={target}", f"--rw={rw}", f"--bs={bs}",
           f"--iodepth={qd}", f"--ioengine={engine}", f"--direct={1 if direct else 0}",
           f"--runtime={runtime}", "--time_based", f"--size={size}", "--output-format=json",
           f"--numjobs={numjobs}"]
    if fio_best and engine == "io_uring":
        cmd += ["--fixedbufs", "--registerfiles"]
    if fio_batch and engine == "io_uring":
        cmd.append(f"--iodepth_batch_submit={fio_batch}")
    if sync:
        cmd.append(f"--fdatasync={sync}")
    jobs = run_json(cmd)["jobs"]
    ds = [j["read"] if j["read"]["total_ios"] else j["write"] for j in jobs]
    ios = sum(d["total_ios"] for d in ds)
    # CPU seconds of each job: its usr+sys share of its own runtime.
    cpu_s = sum((j["usr_cpu"] + j["sys_cpu"]) / 100 * j["job_runtime"] / 1000 for j in jobs)
    sync_p99 = None
    if sync:
        sync_p99 = jobs[0]["sync"]["lat_ns"]["percentile"]["99.000000"]
    return {
        "iops": sum(d["iops"] for d in ds),
        "bw": sum(d["bw_bytes"] for d in ds),
        # The slowest job's p99 (one job: its own).
        "p99": max(d["clat_ns"]["percentile"]["99.000000"] for d in ds),
        "sync_p99": sync_p99,
        "cpu_per_io_us": cpu_s / ios * 1e6,
    }


def compare(label, case_args, rounds, baseline=None, **opts):
    runners = {"tacho": tacho, "fio": fio}
    if baseline:
        runners["baseline"] = lambda *a, **o: tacho(*a, binary=baseline, **o)
    names = list(runners)
    runs = {tool: [] for tool in names}
    for i in range(rounds):
        # Who goes first rotates: a host-side cache warmed by one tool's run would
        # otherwise always favour the next.
        order = names[i % len(names):] + names[:i % len(names)]
        for tool in order:
            runs[tool].append(runners[tool](*case_args, **opts))
    med = {tool: {k: statistics.median(r[k] for r in rs) if rs[0][k] is not None else None
                  for k in rs[0]} for tool, rs in runs.items()}
    rows = []
    for key, unit, scale in [("iops", "IOPS", 1), ("bw", "MiB/s", 1 / 2**20),
                             ("p99", "p99 µs", 1e-3), ("sync_p99", "fdatasync p99 µs", 1e-3),
                             ("cpu_per_io_us", "CPU µs/IO", 1)]:
        t, f = med["tacho"][key], med["fio"][key]
        if t is None or f is None:
            continue
        b = med["baseline"][key] if baseline else None
        rows.append((label, unit, t * scale, f * scale, t / f if f else float("nan"),
                     b / f if b is not None and f else None))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runtime", type=int, default=5, help="seconds per run")
    ap.add_argument("--dir", default="/var/tmp", help="directory on the disk to test")
    ap.add_argument("--only", choices=["loop", "disk"])
    ap.add_argument("--numjobs", type=int, default=1)
    ap.add_argument("--fio-best", action="store_true",
                    help="fio with --fixedbufs --registerfiles")
    ap.add_argument("--fio-batch", type=int, metavar="N",
                    help="fio with --iodepth_batch_submit=N")
    ap.add_argument("--baseline", metavar="OLD_TACHO", help="a previous build to run beside")
    args = ap.parse_args()
    opts = {"numjobs": args.numjobs, "fio_best": args.fio_best, "fio_batch": args.fio_batch}
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
                             args.runtime, "1G"), args.rounds, args.baseline, **opts)
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
                                args.rounds, args.baseline, **opts)
        finally:
            os.unlink(path)
    head = f"{'case':<34} {'metric':<18} {'tacho':>12} {'fio':>12} {'tacho/fio':>10}"
    print(head + (f" {'baseline/fio':>13}" if args.baseline else ""))
    for label, unit, t, f, ratio, base in rows:
        line = f"{label:<34} {unit:<18} {t:>12.1f} {f:>12.1f} {ratio:>10.3f}"
        print(line + (f" {base:>13.3f}" if base is not None else ""))


if __name__ == "__main__":
    main()
