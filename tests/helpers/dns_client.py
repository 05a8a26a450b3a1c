#!/usr/bin/env python3
"""Sends DNS A queries one at a time and waits for each answer (at most 0.3 s).

    python3 dns_client.py SERVER NAME:COUNT [NAME:COUNT ...]

Prints "answered N of M" at the end.
"""

import random
import socket
import struct
import sys


def query(qid, name):
    header = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split("."))
    return header + labels + b"\0" + struct.pack("!HH", 1, 1)


def main():
    server = sys.argv[1]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.3)
    sent = answered = 0
    for spec in sys.argv[2:]:
        name, count = spec.rsplit(":", 1)
        for _ in range(int(count)):
            qid = random.randrange(65536)
            s.sendto(query(qid, name), (server, 53))
            sent += 1
            try:
                while True:
                    reply, _ = s.recvfrom(4096)
                    if struct.unpack("!H", reply[:2])[0] == qid:
                        answered += 1
                        break
            except socket.timeout:
                pass
    print(f"answered {answered} of {sent}", flush=True)


if __name__ == "__main__":
    main()
