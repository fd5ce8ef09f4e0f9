"""Events as the controllers record them: written in the background so a sync never waits on them.

Each event is its own object (`<involved name>.<16 hex>`), stamped when it was recorded, not when written
(client-go's broadcaster is asynchronous too; its aggregation of repeats into `count` is not modelled).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any, Literal

from kubesim.clock import Clock
from kubesim.errors import ApiError
from kubesim.interface import KubeApi

from .objects import Obj

log = logging.getLogger(__name__)

EventKind = Literal["Normal", "Warning"]
_BACKLOG_LIMIT = 10_000
"""Events beyond this backlog are dropped, as client-go's broadcaster drops when its channel is full."""


class EventRecorder:
    def __init__(self, api: KubeApi, component: str, enabled: bool = True) -> None:
        self._api = api
        self._component = component
        self._enabled = enabled
        self._pending: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    def record(self, involved: Obj, kind: EventKind, reason: str, message: str) -> None:
        if not self._enabled or self._pending.qsize() >= _BACKLOG_LIMIT:
            return
        meta = involved.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        now = Clock.wall_time()
        self._pending.put_nowait(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{meta.get('name')}.{secrets.token_hex(8)}", "namespace": namespace},
                "involvedObject": {
                    "apiVersion": involved.get("apiVersion"),
                    "kind": involved.get("kind"),
                    "name": meta.get("name"),
                    "namespace": meta.get("namespace"),
                    "uid": meta.get("uid"),
                    "resourceVersion": meta.get("resourceVersion"),
                },
                "type": kind,
                "reason": reason,
                "message": message,
                "source": {"component": self._component},
                "reportingComponent": self._component,
                "reportingInstance": f"{self._component}-kubesim",
                "firstTimestamp": now,
                "lastTimestamp": now,
                "eventTime": Clock.wall_time_micro(),
                "count": 1,
            }
        )

    async def run(self) -> None:
        while True:
            event = await self._pending.get()
            try:
                await self._api.create(
                    "events", event, namespace=event["metadata"]["namespace"], client=self._component
                )
            except ApiError as error:
                log.debug("dropping event %s: %s", event["reason"], error.message)
