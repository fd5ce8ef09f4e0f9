"""Bounds that keep the webhook answering under abuse: in-flight admissions, body and header timeouts.

A webhook with failurePolicy Fail must fail fast and clearly rather than hang: a flood beyond
`max_inflight` admissions is shed at once with 429 + Retry-After (health checks are never shed), a body
that does not arrive within `body_timeout` gets 408, and a connection that does not finish its request
headers within the header timeout is closed (see `webhook.protocol`).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_INFLIGHT = 256
"""~10x what one API server replica sends in practice (its admission concurrency per webhook is far
lower), so only a flood is shed."""
DEFAULT_BODY_TIMEOUT_SECONDS = 10.0
"""The API server's own default webhook timeout: a body slower than that is never going to be useful."""


@dataclass(frozen=True)
class AdmissionLimits:
    max_inflight: int = DEFAULT_MAX_INFLIGHT
    body_timeout: float = DEFAULT_BODY_TIMEOUT_SECONDS
    retry_after_seconds: int = 1


class InflightGate:
    """Counts admissions in progress on the event loop (single-threaded: no lock needed)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.inflight = 0

    def try_enter(self) -> bool:
        if self.inflight >= self.limit:
            return False
        self.inflight += 1
        return True

    def leave(self) -> None:
        self.inflight -= 1
