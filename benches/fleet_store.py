#!/usr/bin/env python3
"""A fleet uploading to the shared PostgreSQL store: HOSTS simulated hosts with RUNS runs each,
pushed by WRITERS concurrent `tacho runs push` processes (each push retried once, as a host
whose first upload timed out would), then checked: every run present exactly once. Then the
fleet is read back: `tacho compare --by host` over every host's latest run (host-017's runs
are planted 10x slower: it must be the one outlier) and, after each host uploads a snapshot
(this machine's, renamed; THP `always` planted on 3 hosts), `tacho drift` over all of them,
each timed over 3 calls (median).

Usage:
    cargo build --release
    TACHO_TEST_PG='postgres://postgres:PASSWORD@127.0.0.1:5432/postgres?sslmode=disable' \
        python3 benches/fleet_store.py [--hosts 200] [--runs 10] [--writers 8]
(TACHO_BIN=path/to/tacho for a binary elsewhere.)

Each simulated host is a local SQLite store filled with `runs import` of the fio fixture
(three tests per run); its hostname is set in the stored run so the server sees HOSTS hosts.
The script creates a database of its own on the server and drops it at the end. It times the
first pushes (every run new) and the retries (every run already there) separately. Nothing
here is a pass/fail test: machines are noisy.
"""

import argparse
import json
import statistics
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TACHO = os.environ.get("TACHO_BIN", os.path.join(ROOT, "target", "release", "tacho"))
FIO = os.path.join(ROOT, "tests", "fixtures", "fio", "three-jobs.json")


def psql(admin, sql):
    out = subprocess.run(["psql", admin, "-qtAc", sql], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def slow_fixture(tmp):
    """The fio fixture with every job 10x slower: a tenth of the IOPS, ten times the latency."""
    doc = json.load(open(FIO))
    for job in doc["jobs"]:
        for d in ("read", "write"):
            side = job.get(d, {})
            for k in ("iops", "bw", "bw_bytes", "iops_mean", "bw_mean"):
                if k in side:
                    side[k] = side[k] / 10
            for lat in ("clat_ns", "lat_ns", "slat_ns"):
                stats = side.get(lat, {})
                for k in ("min", "max", "mean"):
                    if k in stats:
                        stats[k] = stats[k] * 10
                for p, v in list(stats.get("percentile", {}).items()):
                    stats["percentile"][p] = v * 10
    path = os.path.join(tmp, "slow.json")
    json.dump(doc, open(path, "w"))
    return path


def make_host(tmp, i, runs, slow):
    db = os.path.join(tmp, f"host-{i:03}.db")
    fixture = slow if i == 17 else FIO
    subprocess.run([TACHO, "runs", "import", "--db", db] + [fixture] * runs, check=True,
                   stdout=subprocess.DEVNULL)
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET hostname = ?, host_json = ?",
                (f"host-{i:03}", json.dumps({"hostname": f"host-{i:03}"})))
    con.commit()
    con.close()
    return db


def push_all(url, dbs, writers):
    """WRITERS processes at a time, each pushing one host's store; returns the wall time."""
    def push(db):
        subprocess.run([TACHO, "runs", "push", "--db", url, "--from", db], check=True,
                       stdout=subprocess.DEVNULL)
    start = time.monotonic()
    with ThreadPoolExecutor(writers) as pool:
        list(pool.map(push, dbs))
    return time.monotonic() - start


def timed(args):
    """The median wall time of 3 calls, and the last call's output."""
    times = []
    for _ in range(3):
        start = time.monotonic()
        out = subprocess.run([TACHO] + args, capture_output=True, text=True)
        times.append(time.monotonic() - start)
    return statistics.median(times), out


def read_back(url, tmp, hosts, writers):
    """compare --by host and drift over the fleet; True when each finds what was planted."""
    t, out = timed(["compare", "--by", "host", "--db", url, "--json"])
    outliers = [o["host"] for o in json.loads(out.stdout)["outliers"]]
    print(f"compare --by host over {hosts} hosts: {t:.2f} s; outliers: {outliers}")
    snap = json.loads(subprocess.run([TACHO, "snapshot"], check=True, capture_output=True,
                                     text=True).stdout)
    files = []
    for i in range(hosts):
        snap["host"]["hostname"] = f"host-{i:03}"
        snap["thp"]["enabled"] = "always" if i in (2, 7, 31) else "never"
        path = os.path.join(tmp, f"snap-{i:03}.json")
        json.dump(snap, open(path, "w"))
        files.append(path)
    chunks = [files[k::writers] for k in range(writers)]
    with ThreadPoolExecutor(writers) as pool:
        list(pool.map(lambda c: subprocess.run([TACHO, "runs", "import", "--db", url] + c,
                                               check=True, stdout=subprocess.DEVNULL), chunks))
    t, out = timed(["drift", "--db", url, "--json"])
    settings = json.loads(out.stdout)["settings"]
    thp = [s for s in settings if s["key"] == "thp.enabled"]
    planted = thp and thp[0]["values"][0]["hosts"] == ["host-002", "host-007", "host-031"]
    print(f"drift over {hosts} hosts' snapshots: {t:.2f} s; {len(settings)} settings differ; "
          f"THP always on {thp[0]['values'][0]['hosts'] if thp else 'none'}")
    return outliers == ["host-017"] and bool(planted)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--writers", type=int, default=8)
    a = ap.parse_args()
    admin = os.environ.get("TACHO_TEST_PG")
    if not admin:
        sys.exit("set TACHO_TEST_PG to an admin URL of a PostgreSQL server")
    name = f"tacho_fleet_{os.getpid()}"
    path, _, query = admin.partition("?")
    url = path.rsplit("/", 1)[0] + "/" + name + ("?" + query if query else "")
    psql(admin, f"CREATE DATABASE {name}")
    try:
        # Only store init creates the tables (as the administrator); pushes only check them.
        subprocess.run([TACHO, "store", "init", "--db", url], check=True, capture_output=True)
        with tempfile.TemporaryDirectory(prefix="tacho-fleet-") as tmp:
            t0 = time.monotonic()
            slow = slow_fixture(tmp)
            dbs = [make_host(tmp, i, a.runs, slow) for i in range(a.hosts)]
            print(f"prepared {a.hosts} host stores x {a.runs} runs in "
                  f"{time.monotonic() - t0:.1f} s")
            first = push_all(url, dbs, a.writers)
            retry = push_all(url, dbs, a.writers)
            total = a.hosts * a.runs
            runs = int(psql(url, "SELECT count(*) FROM runs"))
            distinct = int(psql(url, "SELECT count(DISTINCT uuid) FROM runs"))
            hosts = int(psql(url, "SELECT count(DISTINCT hostname) FROM runs"))
            tests = int(psql(url, "SELECT count(*) FROM tests"))
            print(f"first push: {total} runs from {a.hosts} hosts by {a.writers} writers: "
                  f"{first:.2f} s ({total / first:.0f} runs/s)")
            print(f"retried push (all present): {retry:.2f} s")
            print(f"server: {runs} runs, {distinct} distinct ids, {hosts} hosts, {tests} tests")
            ok = runs == distinct == total and hosts == a.hosts and tests == 3 * total
            print("every run present once" if ok else "MISMATCH")
            ok = read_back(url, tmp, a.hosts, a.writers) and ok
            sys.exit(0 if ok else 1)
    finally:
        psql(admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


if __name__ == "__main__":
    main()
