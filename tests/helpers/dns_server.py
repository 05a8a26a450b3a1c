#!/usr/bin/env python3
"""A tiny DNS server for tests: answers every query on ADDR:53 (UDP) by its name.

Names starting with "nx" get NXDOMAIN, "fail" SERVFAIL, "slow" an answer after 50 ms,
"drop" no answer at all; every other name an A record 10.0.0.1. Prints "ready" once bound.

    python3 dns_server.py ADDR
"""

import socket
import struct
import sys
import time


def qname(packet):
    """The first question's name, and where the question ends."""
    labels, at = [], 12
    while packet[at]:
        n = packet[at]
        labels.append(packet[at + 1:at + 1 + n].decode("ascii", "replace"))
        at += 1 + n
    return ".".join(labels), at + 5


def answer(query, rcode, with_a):
    qid, flags = struct.unpack("!HH", query[:4])
    name, end = qname(query)
    # QR, opcode of the query, RD copied, RA set, the response code.
    flags = 0x8000 | (flags & 0x7900) | 0x0080 | rcode
    header = struct.pack("!HHHHHH", qid, flags, 1, 1 if with_a else 0, 0, 0)
    body = query[12:end]
    if with_a:
        body += struct.pack("!HHHLH", 0xC00C, 1, 1, 60, 4) + bytes([10, 0, 0, 1])
    return header + body


def main():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((sys.argv[1], 53))
    print("ready", flush=True)
    while True:
        query, peer = s.recvfrom(4096)
        name, _ = qname(query)
        if name.startswith("drop"):
            continue
        if name.startswith("slow"):
            time.sleep(0.05)
        if name.startswith("nx"):
            s.sendto(answer(query, 3, False), peer)
        elif name.startswith("fail"):
            s.sendto(answer(query, 2, False), peer)
        else:
            s.sendto(answer(query, 0, True), peer)


if __name__ == "__main__":
    main()
