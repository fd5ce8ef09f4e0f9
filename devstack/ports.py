"""Free TCP ports on the loopback interface, for components that take a port number to listen on.

A port is picked below the kernel's ephemeral range, so no outgoing connection of any process can take it
between the pick and the component's bind, and it is reserved for `RESERVATION_SECONDS` in a directory
shared by every devstack process of the machine (one file per port, created exclusively), so two stacks
started at once (two test workers, a test beside `make run`) never pick the same one. The component binds
within seconds; once it listens, `port_is_free` keeps the port out of later picks anyway.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import socket
import tempfile
import time
from pathlib import Path

RESERVATIONS = Path(tempfile.gettempdir()) / "exclusive-placement-ports"
RESERVATION_SECONDS = 600.0
"""How long a picked port stays out of other picks: far longer than any component's start."""
LOWEST_PORT = 10000
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
FALLBACK_EPHEMERAL_LOW = 32768
"""Linux's default start of the ephemeral range, where /proc does not say."""
ATTEMPTS = 200
LOCK_FILE = ".lock"


def free_port(host: str = "127.0.0.1", *, reservations: Path = RESERVATIONS) -> int:
    """A port no listener holds, outside the ephemeral range, reserved for this caller (it binds it next).
    Falls back to a port the OS hands out (the old, racy way) only when the range below the ephemeral
    one is too small or full."""
    low, high = LOWEST_PORT, _ephemeral_low() - 1
    if high - low >= ATTEMPTS:
        for port in random.sample(range(low, high + 1), ATTEMPTS):
            if port_is_free(port, host) and reserve(port, reservations):
                return port
    return _os_assigned_port(host)


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """A server could listen on `port` now (connections left in TIME_WAIT do not count, as for any
    server binding with SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def _ephemeral_low() -> int:
    try:
        return int(EPHEMERAL_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return FALLBACK_EPHEMERAL_LOW


def reserve(port: int, reservations: Path = RESERVATIONS, *, now: float | None = None) -> bool:
    """Take `port`'s reservation in `reservations`; False when another caller holds a live one. Under
    one lock for the directory, which also clears the expired reservations."""
    reservations.mkdir(mode=0o1777, exist_ok=True)
    now = time.time() if now is None else now
    with open(reservations / LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _clear_expired(reservations, now)
        path = reservations / str(port)
        if path.exists():
            return False
        path.write_text(f"{os.getpid()}\n")
        return True


def _clear_expired(reservations: Path, now: float) -> None:
    for path in reservations.iterdir():
        if path.name == LOCK_FILE:
            continue
        with contextlib.suppress(FileNotFoundError):
            if now - path.stat().st_mtime > RESERVATION_SECONDS:
                path.unlink()


def _os_assigned_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port
