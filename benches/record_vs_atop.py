#!/usr/bin/env python3
"""tacho record against atop -w, side by side at the same interval on the same machine.

Starts extra idle processes until about --procs are running (atop and tacho both record
every process), runs `atop -w FILE INTERVAL` and `tacho record --interval INTERVALs --file
FILE` together for --duration seconds, then reports for each: bytes on disk per sample and
per day (extrapolated from the samples taken), and CPU seconds per sample (utime + stime from
/proc/PID/stat just before stopping it).

    python3 benches/record_vs_atop.py --tacho target/release/tacho --interval 10 --duration 240

With --baseline OLD_TACHO a previous build records beside them into its own file (row
"baseline"), so a change of the history's encoding is measured against the build before it in
the same run.
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
    ap.add_argument("--baseline", help="a previous tacho build, recorded beside")
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
            recorders = {"atop": atop}
            files = {"tacho": tacho_file}
            if a.baseline:
                files["baseline"] = os.path.join(d, "baseline", "history.db")
                os.mkdir(os.path.dirname(files["baseline"]))
            for name, file in files.items():
                recorders[name] = subprocess.Popen(
                    [a.tacho if name == "tacho" else a.baseline, "record",
                     "--interval", f"{a.interval}s", "--file", file],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            start = time.time()
            time.sleep(a.duration)
            cpu = {name: cpu_seconds(p.pid) for name, p in recorders.items()}
            elapsed = time.time() - start
            for p in recorders.values():
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=30)
            # atop writes one sample at start and one per interval.
            samples = {"atop": int(elapsed // a.interval) + 1}
            sizes = {"atop": os.path.getsize(atop_file)}
            for name, file in files.items():
                samples[name] = sqlite3.connect(file).execute(
                    "select count(*) from samples").fetchone()[0]
                folder = os.path.dirname(file)
                sizes[name] = sum(os.path.getsize(os.path.join(folder, f))
                                  for f in os.listdir(folder) if f.startswith("history.db"))
            print(f"{procs} processes, interval {a.interval} s, {elapsed:.0f} s recorded")
            print(f"{'tool':<8} {'samples':>7} {'bytes':>10} {'B/sample':>9} "
                  f"{'MB/day':>8} {'CPU s':>7} {'CPU ms/sample':>13}")
            for t in recorders:
                per = sizes[t] / samples[t]
                day = per * 86400 / a.interval / 1e6
                print(f"{t:<8} {samples[t]:>7} {sizes[t]:>10} {per:>9.0f} {day:>8.1f} "
                      f"{cpu[t]:>7.2f} {cpu[t] / samples[t] * 1000:>13.1f}")
    finally:
        for f in fillers:
            f.kill()
            f.wait()


if __name__ == "__main__":
    main()
