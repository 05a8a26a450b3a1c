#!/usr/bin/env python3
"""The fleet's history in one PostgreSQL: HOSTS simulated hosts recording every 10 s for HOURS
hours (default: 1,000 hosts x 24 h = 8.64 million intervals), sent through tacho's real insert
path by WRITERS concurrent `tacho record --db` processes, then the fleet's questions timed.

Usage:
    cargo build --release
    TACHO_TEST_PG='postgres://postgres:PASSWORD@127.0.0.1:5432/postgres?sslmode=disable' \\
        python3 benches/fleet_history.py [--hosts 1000] [--hours 24] [--writers 4] [--keep]
(TACHO_BIN=path/to/tacho for a binary elsewhere; --keep leaves the database for a look.)

The real insert path: each simulated host is a history file whose backlog (the table `tacho
record --db` keeps intervals in while the server is away) holds its intervals; `tacho record
--db URL --count 1` with that host's machine id starts by sending its backlog, in batches, in
order, through the same code that sends live intervals (day partitions made on the way,
idempotent by host and interval). The intervals are copies of a real one recorded on this
machine (its figures and top processes; one in 20 has a disk finding naming a writer, a
planted host has one every interval of a 20-minute window at "03:00"), with the times and
host changed.

Host 0 records the whole day; the others HOURS hours ending 03:10 (so the 03:00 question sees
every host). Measured: intervals per second sent (needed: HOSTS/10 s), bytes per host per day
in PostgreSQL (tables, TOAST and indexes of the partitions and of the host tables, per
interval x 8640), the time of
`tacho top --from 02:50 --to 03:10 --db` over the whole fleet and of `--host` one host's day
(median of 3 calls each). Nothing here is a pass/fail test: machines are noisy.
"""

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TACHO = os.environ.get("TACHO_BIN", os.path.join(ROOT, "target", "release", "tacho"))
DAY = 86400
# The day simulated: 2026-11-20 UTC; "03:00" is 03:00 UTC of it.
DAY0 = 1795132800
QUESTION = (DAY0 + 2 * 3600 + 50 * 60, DAY0 + 3 * 3600 + 10 * 60)


def psql(url, sql):
    out = subprocess.run(["psql", url, "-qtAc", sql], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def rfc3339(unix_s):
    return datetime.fromtimestamp(unix_s, timezone.utc).isoformat()


def machine(i):
    return f"{0xf1ee7000 + i:032x}"


def template(tmp, url):
    """A history file (for copying) and one real interval row recorded on this machine."""
    path = os.path.join(tmp, "template", "history.db")
    os.makedirs(os.path.dirname(path), mode=0o700)
    env = dict(os.environ, TACHO_TEST_MACHINE_ID=machine(999999))
    subprocess.run([TACHO, "record", "--interval", "1s", "--count", "3", "--db", url,
                    "--history", path], check=True, env=env, capture_output=True)
    row = json.loads(psql(url, "SELECT row_to_json(t)::TEXT FROM (SELECT * FROM tacho_history "
                               "ORDER BY at DESC LIMIT 1) t"))
    psql(url, "TRUNCATE tacho_intervals, tacho_host_names, tacho_hosts")
    return path, summary_of(row)


def summary_of(row):
    """The interval's figures as the recorder's backlog holds them (objects), from a row of
    the tacho_history view (lists as arrays)."""
    f = row["figures"]
    s = {k: row[k] for k in ("cpu_busy_pct", "io_stall_pct", "memory_stall_pct",
                             "available_bytes", "device_write_bytes", "process_write_bytes")}
    s["processes"] = [dict(zip(("pid", "comm", "read_bytes", "write_bytes", "cpu_s"), p))
                      for p in f.get("processes", [])]
    s["services"] = [dict(zip(("path", "read_bytes", "write_bytes"), p))
                     for p in f.get("services", [])]
    s["disks"] = [{"name": d[0], "display_name": d[1] or d[0], "read_bytes": d[2],
                   "write_bytes": d[3], "util_pct": d[4]} for d in f.get("disks", [])]
    s["nets"] = [dict(zip(("name", "rx_bytes", "tx_bytes"), p)) for p in f.get("nets", [])]
    return s


FINDING = [{"code": "disk_busy", "severity": "warning", "subject": "sdb",
            "message": "sdb busy 93% of the time: 41.2 MiB/s written, await 18.4 ms "
                       "(backup (pid 4242, backup.service) 97% of writes)",
            "culprits": [{"comm": "backup", "unit": "backup.service", "share_pct": 97.1}]}]


def host_rows(i, hours, summary):
    """The backlog entries of host i, oldest first."""
    end = DAY0 + DAY if i == 0 else QUESTION[1]
    start = end - (DAY if i == 0 else int(hours * 3600))
    planted = i == 17
    for at in range(start + 10, end + 1, 10):
        in_window = QUESTION[0] < at <= QUESTION[1]
        findings = FINDING if (planted and in_window) or at % 200 == 0 else []
        s = dict(summary, start_unix_s=float(at - 10), end_unix_s=float(at))
        yield json.dumps({"machine_id": machine(i), "hostname": f"host-{i:04}",
                          "labels": {"role": "db" if i % 4 == 0 else "web", "dc": "fra1"},
                          "at_unix_s": float(at), "seconds": 10.0, "findings": findings,
                          "summary": s})


def make_host(tmp, tpl, i, hours, summary):
    d = os.path.join(tmp, f"h{i:04}")
    os.makedirs(d, mode=0o700)
    path = os.path.join(d, "history.db")
    shutil.copy(tpl, path)
    con = sqlite3.connect(path)
    con.execute("DELETE FROM fleet_backlog")
    con.executemany("INSERT INTO fleet_backlog (data) VALUES (?)",
                    ((r,) for r in host_rows(i, hours, summary)))
    con.commit()
    con.close()
    return path


def send(url, tmp, tpl, i, hours, summary):
    """Makes host i's history and sends its backlog; returns (intervals, seconds sending)."""
    path = make_host(tmp, tpl, i, hours, summary)
    n = sqlite3.connect(path).execute("SELECT count(*) FROM fleet_backlog").fetchone()[0]
    env = dict(os.environ, TACHO_TEST_MACHINE_ID=machine(i))
    t = time.monotonic()
    subprocess.run([TACHO, "record", "--interval", "1s", "--count", "1", "--db", url,
                    "--history", path], check=True, env=env, capture_output=True)
    took = time.monotonic() - t
    shutil.rmtree(os.path.dirname(path))
    return n, took


def timed(args):
    times = []
    for _ in range(3):
        start = time.monotonic()
        out = subprocess.run([TACHO] + args, capture_output=True, text=True, check=True)
        times.append(time.monotonic() - start)
    return statistics.median(times), out.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--hours", type=float, default=24)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--keep", action="store_true", help="keep the database (its name is printed)")
    a = ap.parse_args()
    admin = os.environ.get("TACHO_TEST_PG")
    if not admin:
        sys.exit("set TACHO_TEST_PG to an admin URL of a PostgreSQL server")
    name = f"tacho_fleet_history_{os.getpid()}"
    path, _, query = admin.partition("?")
    url = path.rsplit("/", 1)[0] + "/" + name + ("?" + query if query else "")
    psql(admin, f"CREATE DATABASE {name}")
    try:
        subprocess.run([TACHO, "store", "init", "--db", url], check=True, capture_output=True)
        with tempfile.TemporaryDirectory(prefix="tacho-fleet-history-") as tmp:
            tpl, summary = template(tmp, url)
            print(f"one interval's figures: {len(json.dumps(summary))} bytes of JSON "
                  f"({len(summary.get('processes', []))} processes, "
                  f"{len(summary.get('disks', []))} disks)")
            start = time.monotonic()
            with ThreadPoolExecutor(a.writers) as pool:
                done = list(pool.map(lambda i: send(url, tmp, tpl, i, a.hours, summary),
                                     range(a.hosts)))
            wall = time.monotonic() - start
            sent = sum(n for n, _ in done)
            sending = sum(t for _, t in done)
            stored = int(psql(url, "SELECT count(*) FROM tacho_history"))
            distinct = int(psql(url, "SELECT count(*) FROM (SELECT DISTINCT machine_id, at "
                                     "FROM tacho_history) d"))
            size = int(psql(url, "SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits "
                                 "WHERE inhparent = 'tacho_intervals'::regclass"))
            size += int(psql(url, "SELECT pg_total_relation_size('tacho_hosts') + "
                                  "pg_total_relation_size('tacho_host_names')"))
            per_interval = size / stored
            doc, whole = psql(url, "SELECT avg(pg_column_size(figures))::INT, "
                                   "avg(pg_column_size(i.*))::INT FROM tacho_intervals i").split("|")
            print(f"a row: {whole} bytes, of which {doc} its figures document")
            print(f"sent {sent} intervals of {a.hosts} hosts with {a.writers} writers in "
                  f"{wall:.1f} s (files made and sent): {sent / wall:.0f} intervals/s overall, "
                  f"{sent / sending * a.writers:.0f}/s counting only the sending; needed for "
                  f"{a.hosts} hosts every 10 s: {a.hosts / 10:.0f}/s")
            print(f"stored {stored} rows ({distinct} distinct host+interval), "
                  f"{size / 2**20:.1f} MiB: {per_interval:.0f} bytes per interval, "
                  f"{per_interval * 8640 / 2**20:.2f} MiB per host per day")
            t, out = timed(["top", "--from", rfc3339(QUESTION[0]), "--to", rfc3339(QUESTION[1]),
                            "--db", url, "--json"])
            fleet = json.loads(out)
            first = fleet["hosts"][0] if fleet["hosts"] else {}
            print(f"03:00 question over the fleet (02:50-03:10, {fleet['hosts_recorded']} hosts "
                  f"recorded, {len(fleet['hosts'])} with findings): {t:.2f} s; worst first: "
                  f"{first.get('hostname')} "
                  f"{first.get('findings', [{}])[0].get('duration_s')} s")
            t, out = timed(["top", "--from", rfc3339(DAY0), "--to", rfc3339(DAY0 + DAY), "--db", url,
                            "--host", machine(0), "--json"])
            print(f"one host's day (--host, {json.loads(out)['intervals']} intervals): {t:.2f} s")
            t, _ = timed(["top", "--from", rfc3339(QUESTION[0]), "--to", rfc3339(QUESTION[1]),
                          "--db", url, "--label", "role=db", "--json"])
            print(f"03:00 question, --label role=db: {t:.2f} s")
    finally:
        if a.keep:
            print(f"kept the database {name}")
        else:
            psql(admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


if __name__ == "__main__":
    main()
