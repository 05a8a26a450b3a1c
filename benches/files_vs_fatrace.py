#!/usr/bin/env python3
"""tacho files against fatrace on the same workload, in one run; prints the ratios.

Usage (root; needs fatrace, losetup, mkfs.ext4):
    cargo build --release && sudo python3 benches/files_vs_fatrace.py [--rounds 3] [--seconds 5]

A scratch ext4 filesystem on a loop device over /dev/shm keeps the rest of the machine's file
activity out. Both tools watch it at the same time (fatrace -c from inside it, tacho files
--mount on it), writing to files outside it, while one process loops: create a file, write
100 bytes, close, delete, as fast as it can. Then, once both outputs stop growing, each tool's
CPU time (utime + stime from /proc/PID/stat) is read and both are stopped.

Figures per tool: events (lines) attributed to the workload's pid; operations (letters on
those lines, each letter counted once per line) and the count of each letter (the workload
performs one create, open, write, close and delete per iteration; the kernel merges events
still queued into one line with several letters, so lines < 5 x iterations is normal); CPU
time per event, per operation and per workload iteration. "Seen for N% of iterations" is the
smallest of the C, O, + and D counts over the iterations performed. Ratios are tacho / fatrace; medians over --rounds. Nothing here is a
pass/fail test: machines are noisy.
"""

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICKS = os.sysconf("SC_CLK_TCK")

WORKLOAD = r"""
import os, sys, time
end = time.monotonic() + float(sys.argv[1])
buf = b'x' * 100
n = 0
while time.monotonic() < end:
    for i in range(200):
        name = 'f%d' % i
        fd = os.open(name, os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, buf)
        os.close(fd)
        os.unlink(name)
    n += 200
print(n)
"""


def default_tacho():
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    return os.path.join(target, "release", "tacho")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def wait_quiet(paths, quiet=1.0, limit=60.0):
    """Waits until none of `paths` has grown for `quiet` seconds."""
    start = time.monotonic()
    sizes = None
    stable_since = time.monotonic()
    while time.monotonic() - start < limit:
        now = [os.path.getsize(p) if os.path.exists(p) else 0 for p in paths]
        if now != sizes:
            sizes, stable_since = now, time.monotonic()
        elif time.monotonic() - stable_since >= quiet:
            return
        time.sleep(0.1)


def count(path, pid):
    """Lines and letters attributed to `pid` in a comm(pid): OPS path log."""
    pattern = re.compile(r"^\S*\((\d+)\): (\S+) ")
    lines = 0
    letters = {c: 0 for c in "RCWO+D<>"}
    with open(path, errors="replace") as f:
        for line in f:
            m = pattern.match(line)
            if not m or int(m.group(1)) != pid:
                continue
            lines += 1
            for c in m.group(2):
                if c in letters:
                    letters[c] += 1
    return lines, letters


def one_round(tacho, mnt, outdir, seconds, index):
    fat_log = os.path.join(outdir, f"fatrace-{index}.log")
    tacho_log = os.path.join(outdir, f"tacho-{index}.log")
    # Both tools' stderr go to files: fatrace warns once per event whose file is already
    # deleted, and an unread pipe would fill and stall it.
    fat_err = open(os.path.join(outdir, f"fatrace-{index}.err"), "w+")
    tacho_err_file = open(os.path.join(outdir, f"tacho-{index}.err"), "w+")
    fat = subprocess.Popen(["fatrace", "-c", "-o", fat_log], cwd=mnt,
                           stdout=subprocess.DEVNULL, stderr=fat_err)
    tch = subprocess.Popen([tacho, "files", "--mount", mnt, "--output", tacho_log],
                           stdout=subprocess.DEVNULL, stderr=tacho_err_file)
    time.sleep(1.0)  # fatrace says nothing when ready; give both time to set their marks
    tacho_err_file.seek(0)
    if not tacho_err_file.read().startswith("tacho: watching"):
        sys.exit("tacho did not start")
    wl = subprocess.run([sys.executable, "-c", WORKLOAD, str(seconds)], cwd=mnt,
                        capture_output=True, text=True, check=True)
    iterations = int(wl.stdout.strip())
    wl_pid = None
    # The workload's pid is not known before it runs; take it from the logs (the only
    # process writing in the scratch filesystem).
    wait_quiet([fat_log, tacho_log])
    cpu = {"tacho": cpu_seconds(tch.pid), "fatrace": cpu_seconds(fat.pid)}
    for p in (tch, fat):
        p.send_signal(signal.SIGINT)
    tch.wait(timeout=60)
    fat.wait(timeout=60)
    tacho_err_file.seek(0)
    tacho_err = tacho_err_file.read()
    fat_err.seek(0)
    fat_warnings = sum(1 for _ in fat_err)
    for f in (fat_err, tacho_err_file):
        f.close()
        os.unlink(f.name)
    with open(tacho_log, errors="replace") as f:
        for line in f:
            m = re.match(r"^python3\((\d+)\):", line)
            if m:
                wl_pid = int(m.group(1))
                break
    if wl_pid is None:
        sys.exit(f"tacho saw no workload events; stderr: {tacho_err}")
    result = {"iterations": iterations}
    for tool, log in (("tacho", tacho_log), ("fatrace", fat_log)):
        lines, letters = count(log, wl_pid)
        operations = sum(letters.values())
        result[tool] = {
            "events": lines,
            "operations": operations,
            "cpu_us_per_operation": cpu[tool] / operations * 1e6 if operations else float("nan"),
            "letters": letters,
            "cpu_s": cpu[tool],
            "cpu_us_per_event": cpu[tool] / lines * 1e6 if lines else float("nan"),
            "cpu_us_per_iteration": cpu[tool] / iterations * 1e6,
        }
    result["tacho_overflow"] = "overflowed" in tacho_err
    result["fatrace_warnings"] = fat_warnings
    for log in (fat_log, tacho_log):
        os.unlink(log)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0, help="workload duration per round")
    ap.add_argument("--tacho", default=default_tacho(), help="tacho binary (release build)")
    args = ap.parse_args()
    if not os.path.exists(args.tacho):
        sys.exit(f"build first: cargo build --release ({args.tacho} missing)")
    img = tempfile.NamedTemporaryFile(dir="/dev/shm", suffix=".img", delete=False).name
    os.truncate(img, 512 << 20)
    mnt = tempfile.mkdtemp(prefix="tacho-bench-files-")
    outdir = tempfile.mkdtemp(dir="/dev/shm", prefix="tacho-bench-logs-")
    loop = subprocess.run(["losetup", "-f", "--show", img], check=True,
                          capture_output=True, text=True).stdout.strip()
    mounted = False
    try:
        subprocess.run(["mkfs.ext4", "-q", "-F", loop], check=True)
        subprocess.run(["mount", loop, mnt], check=True)
        mounted = True
        rounds = [one_round(args.tacho, mnt, outdir, args.seconds, i)
                  for i in range(args.rounds)]
    finally:
        if mounted:
            subprocess.run(["umount", mnt], check=False)
        subprocess.run(["losetup", "-d", loop], check=False)
        os.unlink(img)
        os.rmdir(mnt)
        os.rmdir(outdir)
    report(rounds)


def report(rounds):
    med = lambda xs: statistics.median(xs)
    print(f"rounds: {len(rounds)}; workload iterations (create+write+close+delete), median: "
          f"{med([r['iterations'] for r in rounds]):,.0f}")
    for i, r in enumerate(rounds):
        cover = {tool: min(r[tool]["letters"][c] for c in "CO+D") / r["iterations"]
                 for tool in ("tacho", "fatrace")}
        print(f"round {i + 1}: {r['iterations']:,} iterations; each of C O + D seen for "
              f"{cover['tacho']:.1%} of them by tacho, {cover['fatrace']:.1%} by fatrace "
              f"({r['fatrace_warnings']:,} warning lines from fatrace)")
    if any(r["tacho_overflow"] for r in rounds):
        print("note: tacho reported a queue overflow in at least one round")
    print(f"{'metric':<28}{'tacho':>14}{'fatrace':>14}{'tacho/fatrace':>15}")
    rows = [("events (lines)", "events", 1, "{:,.0f}"),
            ("operations (letters)", "operations", 1, "{:,.0f}"),
            ("CPU s", "cpu_s", 1, "{:.3f}"),
            ("CPU us per event", "cpu_us_per_event", 1, "{:.2f}"),
            ("CPU us per operation", "cpu_us_per_operation", 1, "{:.2f}"),
            ("CPU us per iteration", "cpu_us_per_iteration", 1, "{:.2f}")]
    for label, key, _, fmt in rows:
        t = med([r["tacho"][key] for r in rounds])
        f = med([r["fatrace"][key] for r in rounds])
        print(f"{label:<28}{fmt.format(t):>14}{fmt.format(f):>14}{t / f if f else float('nan'):>15.3f}")
    for letter in "RCWO+D<>":
        t = med([r["tacho"]["letters"][letter] for r in rounds])
        f = med([r["fatrace"]["letters"][letter] for r in rounds])
        if t or f:
            ratio = t / f if f else float("inf")
            print(f"{'letter ' + letter:<28}{t:>14,.0f}{f:>14,.0f}{ratio:>15.3f}")


if __name__ == "__main__":
    main()
