#!/usr/bin/env python3
"""tacho record against atop -w, side by side at the same interval on the same machine.

Starts extra idle processes until about --procs are running (atop and tacho both record
every process), runs `atop -w FILE INTERVAL` and `tacho record --interval INTERVALs --file
FILE` together for --duration seconds, then reports for each: bytes on disk per sample and
per day (extrapolated from the samples taken), and CPU seconds per sample (utime + stime from
/proc/PID/stat just before stopping it).

    python3 benches/record_vs_atop.py --tacho target/release/tacho --interval 10 --duration 240
"""

import argparse
import os
import signal
import sqlite3
import subprocess
import tempfile
import time


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    # utime, stime, cutime, cstime: fields 14-17 of stat, 12-15 after the comm split.
    return sum(int(x) for x in fields[11:15]) / ticks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tacho", default="target/release/tacho")
    ap.add_argument("--interval", type=int, default=10)
    ap.add_argument("--duration", type=int, default=240)
    ap.add_argument("--procs", type=int, default=300)
    a = ap.parse_args()

    running = len([d for d in os.listdir("/proc") if d.isdigit()])
    fillers = [
        subprocess.Popen(["sleep", str(a.duration + 60)])
        for _ in range(max(0, a.procs - running))
    ]
    try:
        with tempfile.TemporaryDirectory(prefix="tacho-vs-atop-") as d:
            atop_file = os.path.join(d, "atop.raw")
            tacho_file = os.path.join(d, "history.db")
            procs = len([p for p in os.listdir("/proc") if p.isdigit()])
            atop = subprocess.Popen(
                ["atop", "-w", atop_file, str(a.interval)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            tacho = subprocess.Popen(
                [a.tacho, "record", "--interval", f"{a.interval}s", "--file", tacho_file],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            start = time.time()
            time.sleep(a.duration)
            cpu = {"atop": cpu_seconds(atop.pid), "tacho": cpu_seconds(tacho.pid)}
            elapsed = time.time() - start
            for p in (atop, tacho):
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=30)
            samples_tacho = sqlite3.connect(tacho_file).execute(
                "select count(*) from samples").fetchone()[0]
            # atop writes one sample at start and one per interval.
            samples_atop = int(elapsed // a.interval) + 1
            sizes = {
                "atop": os.path.getsize(atop_file),
                "tacho": sum(os.path.getsize(os.path.join(d, f))
                             for f in os.listdir(d) if f.startswith("history.db")),
            }
            samples = {"atop": samples_atop, "tacho": samples_tacho}
            print(f"{procs} processes, interval {a.interval} s, {elapsed:.0f} s recorded")
            print(f"{'tool':<6} {'samples':>7} {'bytes':>10} {'B/sample':>9} "
                  f"{'MB/day':>8} {'CPU s':>7} {'CPU ms/sample':>13}")
            for t in ("atop", "tacho"):
                per = sizes[t] / samples[t]
                day = per * 86400 / a.interval / 1e6
                print(f"{t:<6} {samples[t]:>7} {sizes[t]:>10} {per:>9.0f} {day:>8.1f} "
                      f"{cpu[t]:>7.2f} {cpu[t] / samples[t] * 1000:>13.1f}")
    finally:
        for f in fillers:
            f.kill()
            f.wait()


if __name__ == "__main__":
    main()
