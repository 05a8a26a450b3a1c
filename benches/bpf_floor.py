#!/usr/bin/env python3
"""The floor under tacho's block tracer: what merely calling a BPF program on its two
tracepoints (block_io_start, block_rq_complete) costs the same fio workload as
benches/bpf_vs_bcc.py (4 KiB random reads, io_uring depth 32, loop device over /dev/shm),
against tacho top --latency doing its work there. ROUNDS rounds, order rotating, of the
watchers chosen with --watchers (default alone,empty,tacho):

  alone     fio with nothing attached
  empty     two programs that return at once (benches/bpf_floor/empty.bpf.c), attached by a
            throwaway aya loader (benches/bpf_floor/)
  tacho     tacho top --latency --json --interval 1: the programs and top's sampling of /proc
            every second (on one of the CPUs fio uses)
  tacho60   the same with --interval 60s: no sample falls inside fio's run, so this is the
            tracer's programs without top's sampling (tacho minus tacho60 is the sampling)
  base, base60   as tacho and tacho60, for the build given with --baseline
  LABEL     each --object LABEL=PATH.o: the programs io_start and rq_complete of that object
            (a variant of bpf/blockio.bpf.o) attached by the same loader as `empty`, with no
            reader: to compare program bodies without rebuilding tacho

Prints each round's IOPS, then per watcher the median IOPS lost against `alone` in the same
round, the points that is over `empty`'s loss (the floor), and the CPU of the watcher's own
process during fio's run (schedstat of its threads; the programs' time is not in it, as they run
in the I/O's threads): for tacho, that is top's sampling.

--stats turns on kernel.bpf_stats_enabled for the run (it adds two clock reads to every
program run, so IOPS figures are then a little lower for every watcher) and reads each
watcher's programs from its /proc/PID/fdinfo before and after each fio run: runs, ns per run
(median over rounds), the sum of the per-request programs' ns (the cost per request) and its
excess over `empty`'s, recursion_misses (runs the kernel skipped because the program was
already running on that CPU: a request not counted) and verified_insns (what the verifier
walked at load). These per-run times are far less disturbed by other load than IOPS.

Usage (root; clang-14 and libbpf-dev for the object, cargo for the loader, bpftool for the
programs' names with --stats):
  cargo build --release && python3 benches/bpf_floor.py [--rounds 10] [--runtime 3]
      [--watchers alone,empty,tacho,tacho60] [--baseline OTHER/tacho] [--object LABEL=PATH.o]
      [--stats]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bpf_vs_bcc import ROOT, TACHO, fio  # noqa: E402

HERE = os.path.join(ROOT, "benches", "bpf_floor")
STATS = "/proc/sys/kernel/bpf_stats_enabled"
# The programs that run once per request (the others run per dirtied page or not at all).
PER_REQUEST = ("io_start", "rq_complete")


def build(scratch):
    obj = os.path.join(scratch, "empty.bpf.o")
    subprocess.run(["clang-14", "-target", "bpf", "-O2", "-g", "-D__TARGET_ARCH_x86",
                    "-I/usr/include/x86_64-linux-gnu", "-c", os.path.join(HERE, "empty.bpf.c"),
                    "-o", obj], check=True)
    target = os.path.join(scratch, "target")
    subprocess.run(["cargo", "build", "--release", "-q", "--manifest-path",
                    os.path.join(HERE, "Cargo.toml"), "--target-dir", target], check=True)
    return obj, os.path.join(target, "release", "bpf-floor")


def fdinfo(pid):
    """The BPF programs and links among pid's descriptors: ({prog_id: fields}, {linked ids})."""
    progs, linked = {}, set()
    base = f"/proc/{pid}/fdinfo"
    try:
        fds = os.listdir(base)
    except OSError:
        return progs, linked
    for fd in fds:
        try:
            text = open(os.path.join(base, fd)).read()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        if "link_type" in fields and "prog_id" in fields:
            linked.add(int(fields["prog_id"]))
        elif "prog_type" in fields and "prog_id" in fields:
            progs[int(fields["prog_id"])] = {
                k: int(fields.get(k, 0)) for k in
                ("run_time_ns", "run_cnt", "recursion_misses", "verified_insns")}
    return progs, linked


def cpu_ns(pid):
    """CPU time of all pid's threads so far, ns (/proc/PID/task/*/schedstat)."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        try:
            total += int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def prog_names(ids):
    """bpftool's names of the programs (their ids where bpftool is missing)."""
    names = {}
    for i in ids:
        try:
            out = subprocess.run(["bpftool", "-j", "prog", "show", "id", str(i)],
                                 capture_output=True, text=True, check=True).stdout
            names[i] = json.loads(out)["name"]
        except (OSError, subprocess.CalledProcessError, ValueError, KeyError):
            names[i] = f"prog{i}"
    return names


def drain(p):
    """Reads the watcher's output away so it never blocks on a full pipe."""
    threading.Thread(target=lambda: p.stdout.read(), daemon=True).start()
    return p


def attached(cmd, ready):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    while True:
        line = p.stdout.readline()
        if not line or ready(line):
            return drain(p)


def linked(cmd, links):
    """Starts cmd and waits until `links` of its programs are attached, then a little more
    for the rest of its start (its first sample, which has nothing to compare with)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    drain(p)
    for _ in range(400):
        if p.poll() is not None or len(fdinfo(p.pid)[1]) >= links:
            break
        time.sleep(0.025)
    time.sleep(0.5)
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--runtime", type=int, default=3)
    ap.add_argument("--watchers", default="alone,empty,tacho")
    ap.add_argument("--baseline", help="another tacho build: adds base (and base60 with tacho60)")
    ap.add_argument("--object", action="append", default=[], metavar="LABEL=PATH.o")
    ap.add_argument("--stats", action="store_true", help="per-program ns per run (bpf_stats)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: eBPF and loop devices need it")
    names = a.watchers.split(",")
    if a.baseline:
        names += ["base"] + (["base60"] if "tacho60" in names else [])
    objects = dict(o.split("=", 1) for o in a.object)
    names += list(objects)
    with tempfile.TemporaryDirectory() as scratch:
        obj, loader = build(scratch)

        def top(binary, interval):
            cmd = [binary, "top", "--latency", "--json", "--interval", interval]
            if interval == "1":
                return lambda: attached(cmd, lambda l: l.startswith("{"))
            return lambda: linked(cmd, 3)

        def loaded(path):
            return lambda: attached([loader, path, "io_start:block_io_start",
                                     "rq_complete:block_rq_complete"], lambda l: "ready" in l)

        known = {"alone": None, "empty": loaded(obj), "tacho": top(TACHO, "1"),
                 "tacho60": top(TACHO, "60s")}
        if a.baseline:
            known["base"], known["base60"] = top(a.baseline, "1"), top(a.baseline, "60s")
        for label, path in objects.items():
            known[label] = loaded(path)
        unknown = [n for n in names if n not in known]
        if unknown or "alone" not in names:
            sys.exit(f"--watchers: unknown {unknown}; choose among {list(known)} "
                     "(alone is needed: the losses are against it)")
        stats_before = open(STATS).read().strip()
        if a.stats:
            open(STATS, "w").write("1")
        # Per watcher: [(program name, runs, ns, recursion misses, verified insns, requests)].
        runs = {n: [] for n in names}
        iops = {n: [] for n in names}
        cpu = {n: [] for n in names}
        try:
            with tempfile.NamedTemporaryFile(dir="/dev/shm", prefix="tacho-floor-") as img:
                img.truncate(1 << 30)
                dev = subprocess.run(["losetup", "--find", "--show", "--direct-io=on", img.name],
                                     capture_output=True, text=True, check=True).stdout.strip()
                try:
                    for r in range(a.rounds):
                        order = names[r % len(names):] + names[:r % len(names)]
                        for name in order:
                            p = known[name]() if known[name] else None
                            before = fdinfo(p.pid)[0] if p else {}
                            cpu0, t0 = (cpu_ns(p.pid), time.monotonic()) if p else (0, 0)
                            f = fio(dev, a.runtime)
                            iops[name].append(f["iops"])
                            if p:
                                cpu[name].append((cpu_ns(p.pid) - cpu0) / 1e9
                                                 / (time.monotonic() - t0))
                                after, links = fdinfo(p.pid)
                                ids = [i for i in links if i in after and i in before]
                                label = prog_names(ids) if a.stats else {i: str(i) for i in ids}
                                runs[name].append([
                                    (label[i], after[i]["run_cnt"] - before[i]["run_cnt"],
                                     after[i]["run_time_ns"] - before[i]["run_time_ns"],
                                     after[i]["recursion_misses"] - before[i]["recursion_misses"],
                                     after[i]["verified_insns"], f["bytes"] // 4096)
                                    for i in ids])
                                p.terminate()
                                p.wait(timeout=10)
                        print(f"round {r + 1}: " + ", ".join(f"{n} {iops[n][-1]:,.0f}" for n in names),
                              flush=True)
                finally:
                    subprocess.run(["losetup", "-d", dev], check=False)
        finally:
            open(STATS, "w").write(stats_before)
    report(a, names, iops, runs, cpu)


def report(a, names, iops, runs, cpu):
    print(f"{a.rounds} rounds of {a.runtime} s, load average {os.getloadavg()[0]:.2f} at the end"
          + (", bpf_stats on" if a.stats else ""))
    loss = {n: [100 * (1 - x / b) for x, b in zip(iops[n], iops["alone"])] for n in names}
    floor = statistics.median(loss["empty"]) if "empty" in loss else None
    for name in names:
        if name == "alone":
            continue
        m = statistics.median(loss[name])
        over = "" if floor is None or name == "empty" else \
            f"; {m - floor:+.1f} points over the floor (empty's {floor:.1f}%)"
        print(f"{name}: median IOPS lost {m:.1f}% (range {min(loss[name]):.1f}.."
              f"{max(loss[name]):.1f}){over}; its own process used "
              f"{100 * statistics.median(cpu[name]):.2f}% of a CPU")
    if not a.stats:
        return
    print("ns per run (bpf_stats; median over rounds), runs per request, recursion misses:")
    per_request = {}
    for name in names:
        if not runs.get(name):
            continue
        progs = sorted({p[0] for rnd in runs[name] for p in rnd})
        total = []
        for rnd in runs[name]:
            total.append(sum(ns / cnt for prog, cnt, ns, *_ in rnd if prog in PER_REQUEST and cnt))
        per_request[name] = statistics.median(total)
        for prog in progs:
            rows = [p for rnd in runs[name] for p in rnd if p[0] == prog]
            ns = [p[2] / p[1] for p in rows if p[1]]
            cnt = sum(p[1] for p in rows)
            miss = sum(p[3] for p in rows)
            reqs = sum(p[5] for p in rows)
            if not ns:
                continue
            print(f"  {name} {prog}: {statistics.median(ns):.0f} ns/run "
                  f"(range {min(ns):.0f}..{max(ns):.0f}), {cnt:,} runs for fio's {reqs:,} "
                  f"requests, {miss} recursion misses, {rows[-1][4]} verified insns")
    for name, ns in per_request.items():
        extra = "" if "empty" not in per_request or name == "empty" else \
            f", {ns - per_request['empty']:+.0f} ns over empty"
        print(f"{name}: {ns:.0f} ns per request in io_start + rq_complete{extra}")


if __name__ == "__main__":
    main()
