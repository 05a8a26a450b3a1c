#!/usr/bin/env python3
"""Replay-open and window-summary times on a synthetic 7-day history (10 s interval).

Records --seed real samples of this machine with `tacho record`, then writes a 7-day store of
60480 samples by cycling them with rewritten times (counters are not monotonic across a cycle,
so rates there are zero; decoding and judging cost the same). Times, each the best of --repeat:
`tacho top --replay --at "<3 days ago>" --json` (open a moment) and `tacho top --from X --to
X+24h --json` (a 24 h summary).

    python3 benches/history_replay.py --tacho target/release/tacho
"""

import argparse
import os
import re
import sqlite3
import subprocess
import tempfile
import time
import zlib

DAY = 86400


def timed(cmd, repeat):
    best = None
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tacho", default="target/release/tacho")
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--interval", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tacho-replay-") as d:
        seed_db = os.path.join(d, "seed.db")
        subprocess.run([a.tacho, "record", "--interval", "200ms", "--count", str(a.seed),
                        "--file", seed_db], check=True, stderr=subprocess.DEVNULL)
        seeds = [zlib.decompress(r[0]) for r in
                 sqlite3.connect(seed_db).execute("select data from samples order by id")]
        store = os.path.join(d, "history.db")
        # The schema and marks as tacho writes them: one real sample, then the synthetic rows.
        subprocess.run([a.tacho, "record", "--count", "1", "--file", store], check=True,
                       stderr=subprocess.DEVNULL)
        db = sqlite3.connect(store)
        db.execute("delete from samples")
        n = a.days * DAY // a.interval
        end = time.time()
        start = end - n * a.interval
        t0 = time.perf_counter()
        for i in range(n):
            t = start + i * a.interval
            j = seeds[i % len(seeds)]
            j = re.sub(rb'"unix_time_s":[0-9.eE+-]+', b'"unix_time_s":%r' % t, j, count=1)
            j = re.sub(rb'"interval_s":[0-9.eE+-]+', b'"interval_s":%d' % a.interval, j)
            db.execute("insert into samples (unix_s, data) values (?, ?)",
                       (t, zlib.compress(j, 6)))
            if i % 5000 == 0:
                db.commit()
        db.commit()
        db.close()
        build_s = time.perf_counter() - t0
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)
                   if f.startswith("history.db"))
        at = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(end - 3 * DAY))
        at = at[:-2] + ":" + at[-2:]
        frm = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(end - 3 * DAY))
        frm = frm[:-2] + ":" + frm[-2:]
        to = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(end - 2 * DAY))
        to = to[:-2] + ":" + to[-2:]
        replay = timed([a.tacho, "top", "--replay", "--at", at, "--json", "--history", store],
                       a.repeat)
        summary = timed([a.tacho, "top", "--from", frm, "--to", to, "--json",
                         "--history", store], a.repeat)
        print(f"{n} samples over {a.days} days ({size / 1e6:.0f} MB, built in {build_s:.0f} s "
              f"from {len(seeds)} real samples of {len(seeds[0]) / 1e3:.0f} kB JSON each)")
        print(f"replay open (--replay --at, 3 days back): {replay:.2f} s (best of {a.repeat})")
        print(f"24 h summary (--from/--to, {DAY // a.interval} samples): {summary:.2f} s "
              f"(best of {a.repeat})")


if __name__ == "__main__":
    main()
