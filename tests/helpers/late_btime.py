#!/usr/bin/env python3
"""Runs a command in a new time namespace whose boot clock is shifted so that /proc/stat's
btime (whole seconds, rounded down) falls 0.97 s before the boot the clock counts from: the
worst case a machine can boot into, made on purpose.

Usage: late_btime.py PROGRAM [ARGS...]   (root: CLONE_NEWTIME needs CAP_SYS_ADMIN)
"""
import ctypes
import os
import sys
import time

CLONE_NEWTIME = 0x80

libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare(CLONE_NEWTIME) != 0:
    sys.exit("late_btime.py: unshare(CLONE_NEWTIME) failed: errno %d" % ctypes.get_errno())
boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
# Inside, the boot's wall time is `boot - offset`; its fraction of a second becomes 0.97.
offset = (boot % 1 - 0.97) % 1
with open("/proc/self/timens_offsets", "w") as f:
    f.write("boottime 0 %d" % int(offset * 1e9))
# execve moves the caller into the namespace made for its children.
os.execv(sys.argv[1], sys.argv[1:])
