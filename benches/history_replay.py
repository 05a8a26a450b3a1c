#!/usr/bin/env python3
"""Replay-open and window-summary times on a synthetic 7-day history (10 s interval).

Records --seed real samples of this machine with `tacho record`, then writes a 7-day store of
60480 samples by cycling them with rewritten times (counters are not monotonic across a cycle,
so rates there are zero; decoding and judging cost the same). Times, each the best of --repeat:
`tacho top --replay --at "<3 days ago>" --json` (open a moment) and `tacho top --from X --to
X+24h --json` (a 24 h summary).

The rows are written as the recorder writes them (history version 2: a whole sample in zstd
every 61 rows, the others compressed against it), through the `zstd` command line; with
--zlib, as version 1 wrote them, each sample alone in zlib.

    python3 benches/history_replay.py --tacho target/release/tacho
"""

import argparse
import os
import re
import sqlite3
import subprocess
import tempfile
import struct
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


def unpack(blob, keys):
    """A row's JSON, `keys` holding the JSON of key rows by id."""
    if blob[:1] == b"D":
        (key,) = struct.unpack("<q", blob[1:9])
        with tempfile.NamedTemporaryFile() as f:
            f.write(keys[key])
            f.flush()
            return zstd(["-dc", "-D", f.name], blob[9:])
    if blob[:1] == b"x":
        return zlib.decompress(blob)
    return zstd(["-dc"], blob)


def zstd(args, data):
    return subprocess.run(["zstd", "-q"] + args, input=data, capture_output=True,
                          check=True).stdout


def compress_group(texts, d):
    """A key row for texts[0] and delta frames for the rest against it, at the recorder's
    level, one `zstd` run for all the deltas."""
    key = os.path.join(d, "key.json")
    with open(key, "wb") as f:
        f.write(texts[0])
    names = []
    for i, t in enumerate(texts[1:]):
        names.append(os.path.join(d, f"{i:03}.json"))
        with open(names[-1], "wb") as f:
            f.write(t)
    out = os.path.join(d, "out")
    os.makedirs(out, exist_ok=True)
    if names:
        subprocess.run(["zstd", "-q", "-f", "-9", "-D", key, "--output-dir-flat", out] + names,
                       check=True)
    frames = []
    for n in names:
        with open(os.path.join(out, os.path.basename(n) + ".zst"), "rb") as f:
            frames.append(f.read())
    # From the file, not a pipe: the frame then states its size, as the recorder's do.
    return zstd(["-9", "-c", key], b""), frames


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tacho", default="target/release/tacho")
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--interval", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--zlib", action="store_true", help="write version 1's zlib rows")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tacho-replay-") as d:
        seed_db = os.path.join(d, "seed.db")
        subprocess.run([a.tacho, "record", "--interval", "200ms", "--count", str(a.seed),
                        "--file", seed_db], check=True, stderr=subprocess.DEVNULL)
        keys, seeds = {}, []
        for rid, blob in sqlite3.connect(seed_db).execute(
                "select id, data from samples order by id"):
            seeds.append(unpack(blob, keys))
            if blob[:1] != b"D":
                keys[rid] = seeds[-1]
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

        def text(i):
            t = start + i * a.interval
            j = seeds[i % len(seeds)]
            j = re.sub(rb'"unix_time_s":[0-9.eE+-]+', b'"unix_time_s":%r' % t, j, count=1)
            return t, re.sub(rb'"interval_s":[0-9.eE+-]+', b'"interval_s":%d' % a.interval, j)

        group = 1 if a.zlib else 61
        work = os.path.join(d, "work")
        os.mkdir(work)
        for g in range(0, n, group):
            rows = [text(i) for i in range(g, min(n, g + group))]
            if a.zlib:
                db.execute("insert into samples (unix_s, data) values (?, ?)",
                           (rows[0][0], zlib.compress(rows[0][1], 6)))
                continue
            key, frames = compress_group([j for _, j in rows], work)
            kid = db.execute("insert into samples (unix_s, data) values (?, ?)",
                             (rows[0][0], key)).lastrowid
            for (t, _), frame in zip(rows[1:], frames):
                db.execute("insert into samples (unix_s, data) values (?, ?)",
                           (t, b"D" + struct.pack("<q", kid) + frame))
            if g % 5000 < group:
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
