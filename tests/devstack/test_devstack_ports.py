"""Ports for components: free, outside the ephemeral range, and never handed to two callers at once."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from devstack.ports import RESERVATION_SECONDS, free_port, port_is_free, reserve


def ephemeral_low() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def test_a_port_is_free_below_the_ephemeral_range_so_no_outgoing_connection_takes_it(tmp_path: Path) -> None:
    ports = {free_port(reservations=tmp_path) for _ in range(20)}
    assert len(ports) == 20
    assert all(10000 <= port < ephemeral_low() for port in ports)
    assert all(port_is_free(port) for port in ports)


def test_a_reserved_port_is_not_handed_out_again_until_its_reservation_expires(tmp_path: Path) -> None:
    port = free_port(reservations=tmp_path)
    assert not reserve(port, tmp_path)
    assert reserve(port, tmp_path, now=time.time() + RESERVATION_SECONDS + 1)


def test_expired_reservations_are_cleared_when_another_is_taken(tmp_path: Path) -> None:
    first, second = free_port(reservations=tmp_path), free_port(reservations=tmp_path)
    later = time.time() + RESERVATION_SECONDS + 1
    third = next(port for port in range(first + 1, first + 100) if port not in (first, second))
    assert reserve(third, tmp_path, now=later)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != ".lock") == [str(third)]


def test_a_port_a_listener_holds_is_not_free_and_is_free_again_once_it_closes(tmp_path: Path) -> None:
    port = free_port(reservations=tmp_path)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()
        assert not port_is_free(port)
    assert port_is_free(port)
