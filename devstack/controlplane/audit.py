"""The API server's audit log: one JSON event per request (the policy in `cluster.AUDIT_POLICY`).

Each event names the user, the user agent, the verb, the object (resource, subresource, namespace, name)
and the response code: the record of every request the cluster served, by whoever made it. A reader keeps
its offset, so `mark()` then `events_since(mark)` returns exactly the requests of one run.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

Obj = dict[str, Any]

_TAIL_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Request:
    user: str
    user_agent: str
    verb: str
    api_group: str
    """"" for the core group."""
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int
    received: datetime | None = None
    """When the API server received it (`requestReceivedTimestamp`, UTC)."""
    audit_id: str = ""
    """The `auditID`, which the API server also sends back as the response's `Audit-Id` header."""

    @classmethod
    def from_event(cls, event: Obj) -> Request:
        ref = event.get("objectRef") or {}
        received = event.get("requestReceivedTimestamp")
        return cls(
            user=str((event.get("user") or {}).get("username", "")),
            user_agent=str(event.get("userAgent", "")),
            verb=str(event.get("verb", "")),
            api_group=str(ref.get("apiGroup", "")),
            resource=str(ref.get("resource", "")),
            subresource=str(ref.get("subresource", "")),
            namespace=str(ref.get("namespace", "")),
            name=str(ref.get("name", "")),
            code=int((event.get("responseStatus") or {}).get("code", 0)),
            received=datetime.fromisoformat(received) if isinstance(received, str) else None,
            audit_id=str(event.get("auditID", "")),
        )


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> int:
        """The end of the last complete line: requests logged after it are in `requests(since=mark)`.

        The file's size alone can fall inside a line: the kernel grows a file page by page while one write
        is copied, so a line the API server is still writing may be partly visible."""
        if not self.path.exists():
            return 0
        with self.path.open("rb") as log:
            end = log.seek(0, 2)
            while end > 0:
                start = max(0, end - _TAIL_CHUNK)
                log.seek(start)
                newline = log.read(end - start).rfind(b"\n")
                if newline >= 0:
                    return start + newline + 1
                end = start
        return 0

    def requests(self, *, since: int = 0) -> Iterator[Request]:
        """Every complete request logged after byte offset `since` (a line still being written is not)."""
        if not self.path.exists():
            return
        with self.path.open("rb") as log:
            log.seek(since)
            for line in log:
                if line.endswith(b"\n") and line.strip():
                    yield Request.from_event(json.loads(line))


def pod_creations(requests: Iterable[Request], namespace: str) -> Counter[int]:
    """Response code -> count of pod creations in `namespace` (not bindings, evictions or other
    subresources): 201 accepted, 403 denied by an admission webhook, …"""
    return Counter(
        request.code
        for request in requests
        if request.verb == "create"
        and request.resource == "pods"
        and not request.subresource
        and request.namespace == namespace
    )
