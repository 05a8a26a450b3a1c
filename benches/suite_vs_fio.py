#!/usr/bin/env python3
"""A tacho suite and fio running the same tests (from tacho's own --print-fio), side by side.

Usage (root not needed; fio installed):
    cargo build --release && python3 benches/suite_vs_fio.py [--suite quick] [--dir /var/tmp]

Both tools work on one 1 GiB file fully written beforehand. tacho runs the suite with its
default repeats; fio runs every test as many times, and the medians are compared. For the
etcd suite the script also runs etcd's documented fio command and compares the verdicts.
Nothing here is a pass/fail test: machines are noisy.
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TACHO = os.path.join(ROOT, "target", "release", "tacho")


def sh_json(argv):
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode not in (0, 1):  # tacho exits 1 when the etcd verdict fails
        sys.exit(f"{argv[0]} failed: {out.stderr.strip()}")
    return json.loads(out.stdout[out.stdout.index("{"):])


def fio_figures(job):
    d = job["read"] if job["read"]["total_ios"] else job["write"]
    both = job["read"]["total_ios"] and job["write"]["total_ios"]
    iops = job["read"]["iops"] + job["write"]["iops"] if both else d["iops"]
    bw = job["read"]["bw_bytes"] + job["write"]["bw_bytes"] if both else d["bw_bytes"]
    p99 = max(job[k]["clat_ns"]["percentile"].get("99.000000", 0)
              for k in ("read", "write") if job[k]["total_ios"])
    sync = job.get("sync", {}).get("lat_ns", {}).get("percentile", {}).get("99.000000")
    return {"iops": iops, "bw": bw, "p99": p99, "sync_p99": sync}


def tacho_figures(t):
    dirs = [t[k] for k in ("read", "write") if k in t]
    return {
        "iops": sum(d["iops"] for d in dirs),
        "bw": sum(d["bw_bytes_per_s"] for d in dirs),
        "p99": max(d["lat_ns"]["p99"] for d in dirs),
        "sync_p99": t["sync"]["lat_ns"]["p99"] if "sync" in t else None,
    }


def compare_etcd(args):
    """etcd's documented fio command and tacho's etcd suite, each in a fresh directory (etcd
    writes into fresh, preallocated WAL files), alternating, medians of the fdatasync p99."""
    tacho_p99, fio_p99, tacho_iops, fio_iops, statuses = [], [], [], [], []
    for _ in range(args.repeat):
        d = tempfile.mkdtemp(dir=args.dir, prefix="etcd-tacho.")
        try:
            r = sh_json([TACHO, "bench", "disk", d, "--suite", "etcd", "--repeat", "1", "--json"])
        finally:
            subprocess.run(["rm", "-rf", d])
        tacho_p99.append(r["judgement"]["value_ns"])
        tacho_iops.append(r["tests"][0]["write"]["iops"])
        statuses.append(r["judgement"]["status"])
        d = tempfile.mkdtemp(dir=args.dir, prefix="etcd-fio.")
        try:
            job = sh_json(["fio", "--rw=write", "--ioengine=sync", "--fdatasync=1",
                           f"--directory={d}", "--size=22m", "--bs=2300", "--name=mytest",
                           "--output-format=json"])["jobs"][0]
        finally:
            subprocess.run(["rm", "-rf", d])
        fio_p99.append(job["sync"]["lat_ns"]["percentile"]["99.000000"])
        fio_iops.append(job["write"]["iops"])
    t, f = statistics.median(tacho_p99), statistics.median(fio_p99)
    print(f"etcd, {args.repeat} runs each, medians")
    print(f"write IOPS:        tacho {statistics.median(tacho_iops):8.0f}  fio {statistics.median(fio_iops):8.0f}")
    print(f"fdatasync p99 ms:  tacho {t / 1e6:8.3f}  fio {f / 1e6:8.3f}  ratio {t / f:.2f}")
    print(f"verdicts: tacho {statuses}; fio's command {'pass' if f < 10e6 else 'fail'} (p99 < 10 ms)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="quick")
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if not os.path.exists(TACHO):
        sys.exit(f"build first: cargo build --release ({TACHO} missing)")
    if args.suite == "etcd":
        return compare_etcd(args)
    fd, path = tempfile.mkstemp(dir=args.dir, prefix="tacho-suite-vs-fio.")
    os.close(fd)
    try:
        subprocess.run(["fio", "--name=prep", f"--filename={path}", "--size=1G", "--rw=write",
                        "--bs=1M", "--direct=1", "--output-format=terse"],
                       check=True, capture_output=True)
        common = [path, "--suite", args.suite, "--repeat", str(args.repeat), "--randseed", "42"]
        fio_lines = subprocess.run([TACHO, "bench", "disk", *common, "--print-fio"], check=True,
                                   capture_output=True, text=True).stdout
        report = sh_json([TACHO, "bench", "disk", *common, "--json", "--destroy-data"])
        fio_cmds = [shlex.split(l) for l in fio_lines.splitlines() if l.startswith("fio ")]
        rows = []
        for test, cmd in zip(report["tests"], fio_cmds):
            runs = [fio_figures(sh_json(cmd + ["--output-format=json"])["jobs"][0])
                    for _ in range(args.repeat)]
            f = {k: statistics.median(r[k] for r in runs) if runs[0][k] is not None else None
                 for k in runs[0]}
            rows.append((test["name"], tacho_figures(test), f))
        print(f"suite {args.suite} v{report['suite']['version']}, {args.repeat} runs each, "
              f"medians; file {path}")
        print(f"{'test':<28} {'IOPS tacho':>11} {'fio':>11} {'ratio':>6}  "
              f"{'p99 µs tacho':>12} {'fio':>9} {'ratio':>6}")
        for name, t, f in rows:
            key = "sync_p99" if t["sync_p99"] is not None and f["sync_p99"] else "p99"
            print(f"{name:<28} {t['iops']:>11.0f} {f['iops']:>11.0f} {t['iops'] / f['iops']:>6.3f}  "
                  f"{t[key] / 1e3:>12.1f} {f[key] / 1e3:>9.1f} {t[key] / f[key]:>6.3f}"
                  + ("  (fdatasync)" if key == "sync_p99" else ""))
    finally:
        os.unlink(path)


if __name__ == "__main__":
    main()
