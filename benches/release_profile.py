#!/usr/bin/env python3
"""Two builds of tacho (two release profiles) on the same loop-device work; prints the ratio.

Usage (root; needs losetup):
    cargo build --release && cp target/release/tacho /tmp/tacho-a
    CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \\
        cargo build --release --target-dir /tmp/lto && cp /tmp/lto/release/tacho /tmp/tacho-b
    sudo python3 benches/release_profile.py /tmp/tacho-a /tmp/tacho-b [--rounds 5]

The work: 4k randread at QD32 for 5 s on a loop device over a 1 GiB file in /dev/shm, where
the CPU cost per I/O decides the IOPS. The two binaries alternate (a b, b a, …) so drift of
the machine hits both; medians of the rounds and their ratio are printed, with each binary's
size. Nothing here is a pass/fail test.
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile


def iops(binary, dev, runtime):
    out = subprocess.run(
        [binary, "bench", "disk", dev, "--rw", "randread", "--bs", "4k", "--iodepth", "32",
         "--runtime", f"{runtime}s", "--json", "--no-save"],
        check=True, capture_output=True, text=True).stdout
    test = json.loads(out)["tests"][0]
    cpu = test["cpu"]["user_s"] + test["cpu"]["sys_s"]
    return test["read"]["iops"], cpu / test["read"]["ios"] * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runtime", type=int, default=5)
    args = ap.parse_args()
    with tempfile.NamedTemporaryFile(dir="/dev/shm", prefix="tacho-profile-") as backing:
        backing.truncate(1 << 30)
        with open("/dev/urandom", "rb") as r:
            for _ in range(1 << 4):
                backing.write(r.read(64 << 20))
        backing.flush()
        dev = subprocess.run(["losetup", "--find", "--show", backing.name], check=True,
                             capture_output=True, text=True).stdout.strip()
        try:
            res = {args.a: [], args.b: []}
            for r in range(args.rounds):
                order = [args.a, args.b] if r % 2 == 0 else [args.b, args.a]
                for binary in order:
                    res[binary].append(iops(binary, dev, args.runtime))
        finally:
            subprocess.run(["losetup", "-d", dev], check=False)
    med = {}
    for binary, runs in res.items():
        med[binary] = (statistics.median(i for i, _ in runs), statistics.median(c for _, c in runs))
        print(f"{binary}: {os.path.getsize(binary)} bytes, IOPS median {med[binary][0]:.0f} "
              f"(rounds: {', '.join(f'{i:.0f}' for i, _ in runs)}), CPU per I/O "
              f"{med[binary][1]:.2f} µs")
    print(f"b/a IOPS {med[args.b][0] / med[args.a][0]:.3f}, CPU per I/O "
          f"{med[args.b][1] / med[args.a][1]:.3f}, size {os.path.getsize(args.b) / os.path.getsize(args.a):.3f}")


if __name__ == "__main__":
    main()
