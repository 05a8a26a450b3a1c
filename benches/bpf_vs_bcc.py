#!/usr/bin/env python3
"""Per-I/O tracing under load: tacho top --latency against the tools it replaces, on the same
fio workload (4 KiB random reads, io_uring, depth 32, on a loop device over /dev/shm), in one
run, alternating order, ROUNDS rounds:

  none      fio alone: the workload's IOPS with nothing watching
  tacho     tacho top --latency --json --interval 1 (eBPF, pure-Rust loader, objects built in)
  bpftrace  a biolatency equivalent on the block tracepoints (bpftrace, Debian)
  bcc       biolatency-bpfcc and biotop-bpfcc (BCC, Debian) -- tried once; BCC compiles its
            programs at start with LLVM and the running kernel's headers, and where those are
            missing it cannot start at all (its error is printed)

For each watcher: time from start to its first figures, its CPU (utime+stime of it and its
children) per second of the run, and the IOPS the workload lost against `none` in the same
round. Then the agreement of tacho's figures with the kernel's and fio's, over tacho's runs:
requests on the loop device against /proc/diskstats for the same window (target 1%), bytes of
the fio processes against fio's own io_bytes (2%), and the loop device's latency percentiles
(its total time, from the merged fine buckets of every interval) against fio's completion
latency (10%) -- on the RAM-backed device, where fio's own syscall and wake-ups outweigh the
device, and on a device whose reads take ~2 ms (a loop device over a file on a FUSE server
that sleeps, tests/helpers/passfs.py), where the device dominates as on a real disk.

Usage (root):  cargo build --release && python3 benches/bpf_vs_bcc.py [--rounds 3] [--runtime 8]
               [--baseline OTHER/tacho] [--no-bpftrace]
--baseline adds another tacho build as a watcher (to measure a change of the programs);
--no-bpftrace leaves bpftrace out (more rounds in the same time).
Nothing here is a pass/fail test: this VM's CPU swings 2x between runs.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TACHO = os.environ.get("TACHO_BIN", os.path.join(ROOT, "target", "release", "tacho"))
TICK = os.sysconf("SC_CLK_TCK")

BPFTRACE = r"""
tracepoint:block:block_rq_issue { @start[args->dev, args->sector] = nsecs; }
tracepoint:block:block_rq_complete /@start[args->dev, args->sector]/ {
  @usecs = hist((nsecs - @start[args->dev, args->sector]) / 1000);
  delete(@start[args->dev, args->sector]);
}
interval:s:1 { print(@usecs); clear(@usecs); }
"""


def cpu_ticks(pid):
    """utime + stime + cutime + cstime of a process, in clock ticks (None once it is gone)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return sum(int(fields[i]) for i in (11, 12, 13, 14))


def diskstats(name):
    for line in open("/proc/diskstats"):
        f = line.split()
        if f[2] == name:
            return int(f[3]) + int(f[7])  # reads + writes completed
    return 0


def fio(dev, runtime, depth=32):
    engine = "io_uring" if depth > 1 else "psync"
    out = subprocess.run(
        ["fio", "--name=rr", f"--filename={dev}", "--rw=randread", "--bs=4k", "--direct=1",
         f"--ioengine={engine}", f"--iodepth={depth}", f"--runtime={runtime}", "--time_based",
         "--output-format=json"],
        capture_output=True, text=True, check=True)
    job = json.loads(out.stdout)["jobs"][0]["read"]
    pct = job["clat_ns"]["percentile"]
    return {"iops": job["iops"], "bytes": job["io_bytes"], "p50_us": pct["50.000000"] / 1e3,
            "p90_us": pct["90.000000"] / 1e3, "p99_us": pct["99.000000"] / 1e3}


def watch(cmd, first_marker):
    """Starts a watcher; returns (process, seconds to its first figures)."""
    start = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    first = None
    while True:
        line = p.stdout.readline()
        if not line:
            break
        if first_marker(line):
            first = time.monotonic() - start
            break
    return p, first


def run_with(watcher, dev, runtime, depth=32):
    """One fio run under `watcher` (None: alone); returns fio's figures and the watcher's."""
    if watcher is None:
        return fio(dev, runtime, depth), None
    p, first = watcher()
    ticks0, t0 = cpu_ticks(p.pid), time.monotonic()
    before = diskstats(os.path.basename(dev))
    figures = fio(dev, runtime, depth)
    time.sleep(1.5)  # the interval that holds fio's last requests
    after = diskstats(os.path.basename(dev))
    ticks1, t1 = cpu_ticks(p.pid), time.monotonic()
    p.terminate()
    rest, _ = p.communicate(timeout=10)
    cpu = (ticks1 - ticks0) / TICK / (t1 - t0) if ticks0 is not None and ticks1 else None
    return figures, {"first_s": first, "cpu": cpu, "out": rest, "diskstats": after - before}


def tacho_watcher(binary=None):
    return watch([binary or TACHO, "top", "--latency", "--json", "--interval", "1"],
                 lambda l: l.startswith("{"))


def bpftrace_watcher():
    return watch(["bpftrace", "-e", BPFTRACE], lambda l: l.startswith("@usecs"))


def percentile(buckets, q):
    """As tacho's: the q-quantile of merged [low, high, count] buckets, interpolated linearly."""
    total = sum(c for _, _, c in buckets)
    rank, seen = q * total, 0
    for low, high, count in buckets:
        if count and seen + count >= rank:
            return low + (high - low) * (rank - seen) / count
        seen += count
    return None


def merge(into, buckets):
    for low, high, count in buckets:
        into[(low, high)] = into.get((low, high), 0) + count


def agreement(dev, fio_figures, tacho_out):
    """Requests and fio's bytes as tacho saw them on dev, and its merged total-time buckets."""
    name = os.path.basename(dev)
    requests, fio_bytes, total = 0, 0, {}
    for line in tacho_out.splitlines():
        if not line.startswith("{"):
            continue
        doc = json.loads(line)
        for d in doc["devices"]:
            if d["device"] == name:
                requests += d["total"]["requests"]
                merge(total, d["total"]["buckets"])
        for p in doc["processes"]:
            if p["device"] == name and p["comm"].startswith("fio"):
                fio_bytes += p["bytes"]
    buckets = sorted((low, high, c) for (low, high), c in total.items())
    return requests, fio_bytes, buckets


def latency_line(label, buckets, f):
    parts = []
    for q, key in ((0.5, "p50_us"), (0.9, "p90_us"), (0.99, "p99_us")):
        ours = percentile(buckets, q)
        parts.append(f"{key[:-3]} {ours:.1f} vs {f[key]:.1f} µs ({100 * (ours / f[key] - 1):+.1f}%)")
    print(f"  {label}: tacho total vs fio clat: " + "; ".join(parts))


def slow_device(runtime):
    """Depth-1 reads of a loop device whose image sits on a FUSE server sleeping 2 ms per read."""
    backing = tempfile.mkdtemp(dir="/dev/shm", prefix="tacho-slow-")
    mnt = tempfile.mkdtemp(prefix="tacho-slow-mnt-")
    # Debian's python3, which has python3-fusepy (not whatever python3 comes first in PATH).
    server = subprocess.Popen(["/usr/bin/python3", os.path.join(ROOT, "tests", "helpers", "passfs.py"),
                               backing, mnt, "--delay", "0.002", "--direct-io"])
    try:
        for _ in range(100):
            if os.path.ismount(mnt) or server.poll() is not None:
                break
            time.sleep(0.05)
        if not os.path.ismount(mnt):
            print("  ~2 ms device: the FUSE server did not mount (python3-fusepy missing?); skipped")
            return
        img = os.path.join(mnt, "img")
        with open(img, "wb") as f:
            f.truncate(16 << 20)
        dev = subprocess.run(["losetup", "--find", "--show", img], capture_output=True,
                             text=True, check=True).stdout.strip()
        try:
            f, w = run_with(tacho_watcher, dev, runtime, depth=1)
            _, _, buckets = agreement(dev, f, w["out"])
            latency_line("~2 ms device, depth 1", buckets, f)
        finally:
            subprocess.run(["losetup", "-d", dev], check=False)
    finally:
        if os.path.ismount(mnt):
            subprocess.run(["umount", mnt], check=False)
        server.wait(timeout=10)
        os.rmdir(mnt)
        subprocess.run(["rm", "-rf", backing], check=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runtime", type=int, default=8)
    ap.add_argument("--baseline")
    ap.add_argument("--no-bpftrace", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: eBPF and loop devices need it")
    if not os.path.ismount("/sys/kernel/tracing"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], check=False)
    for tool in ("biolatency-bpfcc", "biotop-bpfcc"):
        r = subprocess.run([tool, "1", "1"], capture_output=True, text=True, timeout=120)
        why = ((r.stdout + r.stderr).strip().splitlines() or ["?"])
        print(f"{tool}: exit {r.returncode}: {next((l for l in why if 'kernel headers' in l), why[-1])}")
    with tempfile.NamedTemporaryFile(dir="/dev/shm", prefix="tacho-bpf-") as img:
        img.truncate(1 << 30)
        dev = subprocess.run(["losetup", "--find", "--show", "--direct-io=on", img.name],
                             capture_output=True, text=True, check=True).stdout.strip()
        try:
            rows = {"none": [], "tacho": [], "bpftrace": [], "baseline": []}
            agree = []
            order = [("none", None), ("tacho", tacho_watcher)]
            if not a.no_bpftrace:
                order.append(("bpftrace", bpftrace_watcher))
            if a.baseline:
                order.append(("baseline", lambda: tacho_watcher(a.baseline)))
            for r in range(a.rounds):
                for name, watcher in (order if r % 2 == 0 else order[::-1]):
                    figures, w = run_with(watcher, dev, a.runtime)
                    rows[name].append((figures, w))
                    if name == "tacho":
                        agree.append((figures, w, agreement(dev, figures, w["out"])))
            report(rows, agree)
            # Latency against fio's at depth 1 (psync): at depth 32 most of fio's completion
            # latency is waiting in io_uring before the block layer sees the request.
            f, w = run_with(tacho_watcher, dev, a.runtime, depth=1)
            latency_line("RAM loop device, depth 1", agreement(dev, f, w["out"])[2], f)
            slow_device(a.runtime)
            startup()
        finally:
            subprocess.run(["losetup", "-d", dev], check=False)


def startup():
    """Start to first figures with a 100 ms interval: the load and attach, plus 100 ms."""
    for name, cmd, marker in (
        ("tacho", [TACHO, "top", "--latency", "--json", "--interval", "100ms"],
         lambda l: l.startswith("{")),
        ("bpftrace", ["bpftrace", "-e", BPFTRACE.replace("interval:s:1", "interval:ms:100")],
         lambda l: l.startswith("@usecs")),
    ):
        times = []
        for _ in range(3):
            p, first = watch(cmd, marker)
            p.terminate()
            p.communicate(timeout=10)
            times.append(first)
        print(f"{name}: start to first figures at a 100 ms interval: "
              f"{', '.join(f'{t:.2f} s' for t in times if t is not None)}")


def report(rows, agree):
    base = [f["iops"] for f, _ in rows["none"]]
    print(f"\nfio alone: IOPS {', '.join(f'{x:,.0f}' for x in base)}")
    for name in ("tacho", "baseline", "bpftrace"):
        for i, (f, w) in enumerate(rows[name]):
            loss = 100 * (1 - f["iops"] / base[i])
            first = f"{w['first_s']:.2f} s" if w["first_s"] is not None else "never"
            cpu = f"{100 * w['cpu']:.1f}%" if w["cpu"] is not None else "?"
            print(f"{name:9} round {i + 1}: first figures {first}, CPU {cpu} of a core, "
                  f"IOPS {f['iops']:,.0f} ({loss:+.1f}% lost)")
    for name in ("tacho", "baseline", "bpftrace"):
        losses = sorted(100 * (1 - f["iops"] / base[i]) for i, (f, _) in enumerate(rows[name]))
        if losses:
            print(f"{name}: median IOPS lost {losses[len(losses) // 2]:.1f}% over {len(losses)} rounds")
    t = [w["cpu"] for _, w in rows["tacho"] if w["cpu"]]
    b = [w["cpu"] for _, w in rows["bpftrace"] if w["cpu"]]
    if t and b:
        print(f"tacho CPU / bpftrace CPU: {sum(t) / len(t) / (sum(b) / len(b)):.2f}x")
    print("\nagreement (tacho rounds):")
    for f, w, (requests, fio_bytes, buckets) in agree:
        print(f"  requests {requests:,} vs /proc/diskstats {w['diskstats']:,} "
              f"({100 * (requests / w['diskstats'] - 1):+.2f}%); fio processes' bytes "
              f"{fio_bytes:,} vs fio io_bytes {f['bytes']:,} ({100 * (fio_bytes / f['bytes'] - 1):+.2f}%)")
        latency_line("RAM loop device, depth 32", buckets, f)


if __name__ == "__main__":
    main()
