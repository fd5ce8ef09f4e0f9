"""Waiting for components: a line in a log file, an HTTP endpoint answering 200."""

from __future__ import annotations

import re
import ssl
import time
from pathlib import Path

import httpx

from devstack.interrupts import pause
from devstack.processes import ManagedProcess, ProcessError


class NotReadyError(ProcessError):
    """A component is running but did not become ready in time."""


def wait_for_log_line(process: ManagedProcess, pattern: re.Pattern[str], timeout: float) -> re.Match[str]:
    """Poll the component's log until a line matches `pattern`; fail fast if the process exits."""
    deadline = time.monotonic() + timeout
    while True:
        match = pattern.search(process.log_since_start())
        if match:
            return match
        process.check_alive()
        if time.monotonic() > deadline:
            raise NotReadyError(
                f"{process.name} printed no line matching {pattern.pattern!r} within {timeout:.0f}s; "
                f"last lines of {process.log_path}:\n{process.log_tail()}"
            )
        pause(0.05)


def wait_http_ok(process: ManagedProcess, url: str, timeout: float, *, ca_file: Path | None = None) -> None:
    """Poll `url` until it answers 200 (verifying TLS against `ca_file` for https)."""
    verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=str(ca_file)) if ca_file else True
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    with httpx.Client(verify=verify, timeout=2.0) as client:
        while True:
            try:
                response = client.get(url)
                if response.status_code == 200:
                    return
                last = f"HTTP {response.status_code}: {response.text[:200]}"
            except httpx.HTTPError as err:
                last = f"{type(err).__name__}: {err}"
            process.check_alive()
            if time.monotonic() > deadline:
                raise NotReadyError(
                    f"{process.name} not ready at {url} within {timeout:.0f}s (last: {last}); "
                    f"last lines of {process.log_path}:\n{process.log_tail()}"
                )
            pause(0.1)
