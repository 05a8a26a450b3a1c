#!/usr/bin/env python3
"""Runs a command with the bpf() syscall refused (EPERM) by a seccomp filter, everything else
allowed: a kernel or container without BPF, for tests of tacho's fallback. x86-64 only.

Usage: nobpf.py COMMAND [ARG...]
"""
import ctypes
import os
import struct
import sys

BPF_NR = 321  # x86-64
LD_W_ABS, JEQ_K, RET_K = 0x20, 0x15, 0x06
ALLOW, ERRNO_EPERM = 0x7FFF0000, 0x00050000 | 1

# seccomp_data.nr is at offset 0: if nr == bpf, refuse with EPERM; otherwise allow.
program = [
    (LD_W_ABS, 0, 0, 0),
    (JEQ_K, 0, 1, BPF_NR),
    (RET_K, 0, 0, ERRNO_EPERM),
    (RET_K, 0, 0, ALLOW),
]
raw = b"".join(struct.pack("HBBI", *insn) for insn in program)
buf = ctypes.create_string_buffer(raw, len(raw))


class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


prog = Fprog(len(program), ctypes.cast(buf, ctypes.c_void_p))
libc = ctypes.CDLL(None, use_errno=True)
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
    sys.exit(f"prctl(NO_NEW_PRIVS): errno {ctypes.get_errno()}")
if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
    sys.exit(f"prctl(SECCOMP): errno {ctypes.get_errno()}")
os.execvp(sys.argv[1], sys.argv[1:])
