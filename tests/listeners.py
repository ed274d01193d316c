"""TCP sockets in LISTEN state, read from the kernel's tables (/proc/net/tcp and tcp6), for tests that
check where a server listens: Serve's proxy, and every process of an embedded Ray."""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Listener:
    address: str  # as inet_ntop prints it: "127.0.0.1", "::", "::ffff:127.0.0.1"
    port: int
    inode: str  # the socket's inode, as /proc/PID/fd links name it ("socket:[INODE]")


def tcp_listeners() -> list[Listener]:
    found = []
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A":  # 0A: LISTEN
                continue
            hex_address, _, hex_port = fields[1].partition(":")
            # The kernel prints the address as 32-bit words in host (little-endian) order.
            raw = bytes.fromhex(hex_address)
            words = (int.from_bytes(raw[i : i + 4], "big") for i in range(0, len(raw), 4))
            address = socket.inet_ntop(family, b"".join(struct.pack("<I", word) for word in words))
            found.append(Listener(address, int(hex_port, 16), fields[9]))
    return found
