"""`--bpffs` for the benches that time `tacho top` (imported by them, not run).

tacho keeps its block tracer loaded between runs where a bpffs is mounted at /sys/fs/bpf, as
systemd mounts one at boot (src/bpf/pin.rs). `enter()` re-executes the bench in a mount
namespace of its own with a new bpffs there, so the bench's first tacho run loads and pins,
as the first run of a boot does, and the later ones reuse; the namespace and its pins go when
the bench exits. `FRESH` is the environment that keeps a run from reusing (TACHO_BPF_PIN=0):
the cost every run paid before, measured beside in the same rotation.
"""

import os
import sys

MARK = "TACHO_BENCH_IN_BPFFS"
FRESH = {"TACHO_BPF_PIN": "0"}


def enter():
    """Re-executes this bench under unshare with a bpffs at /sys/fs/bpf (root only)."""
    if os.environ.get(MARK):
        return
    os.environ[MARK] = "1"
    mount = 'mount -t bpf bpf /sys/fs/bpf && exec "$@"'
    argv = ["unshare", "-m", "--propagation", "private", "sh", "-c", mount, "sh",
            sys.executable, *sys.argv]
    try:
        os.execvp("unshare", argv)
    except OSError as e:
        sys.exit(f"--bpffs needs unshare (util-linux) and root: {e}")


def env(extra):
    """This process's environment with `extra` set (None: unchanged)."""
    return None if extra is None else {**os.environ, **extra}
