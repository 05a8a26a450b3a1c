#!/usr/bin/env python3
"""A fleet uploading to the shared PostgreSQL store: HOSTS simulated hosts with RUNS runs each,
pushed by WRITERS concurrent `tacho runs push` processes (each push retried once, as a host
whose first upload timed out would), then checked: every run present exactly once.

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


def make_host(tmp, i, runs):
    db = os.path.join(tmp, f"host-{i:03}.db")
    subprocess.run([TACHO, "runs", "import", "--db", db] + [FIO] * runs, check=True,
                   stdout=subprocess.DEVNULL)
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET hostname = ?", (f"host-{i:03}",))
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
        with tempfile.TemporaryDirectory(prefix="tacho-fleet-") as tmp:
            t0 = time.monotonic()
            dbs = [make_host(tmp, i, a.runs) for i in range(a.hosts)]
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
            sys.exit(0 if ok else 1)
    finally:
        psql(admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


if __name__ == "__main__":
    main()
