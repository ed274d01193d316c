"""TCP sockets in LISTEN state, read from the kernel's tables (/proc/net/tcp and tcp6), for tests that
check where a server listens: Serve's proxy, and every process of an embedded Ray."""

from __future__ import annotations

import contextlib
import ipaddress
import os
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


def process_tree(root: int) -> set[int]:
    """``root`` and every process descended from it (Ray's daemons, agents and workers are)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        try:
            # Field 4 of /proc/PID/stat, after the command's name (which may hold spaces) in parentheses.
            parents[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (ValueError, OSError, IndexError):
            continue
    found, grown = {root}, True
    while grown:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        found |= more
        grown = bool(more)
    return found


def listeners_of(pids: set[int]) -> list[tuple[str, str]]:
    """(local address, command) of every TCP socket in LISTEN state that one of ``pids`` holds."""
    return [(listener.address, command) for listener, command in sockets_of(pids)]


def sockets_of(pids: set[int]) -> list[tuple[Listener, str]]:
    """Every TCP socket in LISTEN state that one of ``pids`` holds, with that process's command."""
    owner: dict[str, int] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("socket:["):
                        owner[target[len("socket:[") : -1]] = pid
    return [
        (listener, Path(f"/proc/{owner[listener.inode]}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        for listener in tcp_listeners()
        if listener.inode in owner
    ]


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)
