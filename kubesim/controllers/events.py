"""The legacy core/v1 event recorder (client-go tools/record), used by the Job controller, JobSet, kubelets.

`record` builds the Event at once (stamped now) and queues it without ever blocking the caller; a queue of
1000 events (the sink watcher's channel of client-go's broadcaster, which drops when full) is drained by
one writer task that runs each event through the `EventCorrelator` and then creates it, or PATCHes the
count of an earlier identical one (recordToSink / recordEvent in tools/record/event.go):

- a PATCH answered 404 (the event expired or was deleted) falls back to a create;
- an API status error (any `ApiError`, 5xx included: client-go's StatusError) is final: the event is
  dropped, never retried;
- a transport error (`OSError`, `TimeoutError`) is retried up to 12 tries, the first wait a random
  fraction of 10 s, then 10 s each.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import time
import uuid
from typing import Any, Literal

from kubesim.clock import Clock
from kubesim.errors import ApiError
from kubesim.interface import KubeApi

from .event_correlator import EventCorrelator
from .objects import Obj

log = logging.getLogger(__name__)

EventKind = Literal["Normal", "Warning"]
EVENT_KINDS: frozenset[str] = frozenset({"Normal", "Warning"})
MAX_QUEUED_EVENTS = 1000
"""client-go's maxQueuedEvents: events recorded while this many wait for the sink are dropped."""
MAX_TRIES_PER_EVENT = 12
RETRY_SLEEP_SECONDS = 10.0
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def event_name(involved_name: str) -> str:
    """GenerateEventName: `<name>.<unix nanoseconds in hex>`, or a UUID when that is no valid name."""
    name = f"{involved_name}.{time.time_ns():x}"
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        return str(uuid.uuid4())
    return name


def object_reference(obj: Obj, field_path: str = "") -> dict[str, Any]:
    """reference.GetReference: the fields of an ObjectReference that are set (plus fieldPath, if any)."""
    meta = obj.get("metadata") or {}
    reference = {
        "kind": obj.get("kind"),
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "apiVersion": obj.get("apiVersion"),
        "resourceVersion": meta.get("resourceVersion"),
        "fieldPath": field_path,
    }
    return {key: value for key, value in reference.items() if value}


class EventRecorder:
    """One component's broadcaster, sink and correlator (source `component`, `host` for kubelets)."""

    def __init__(
        self,
        api: KubeApi,
        component: str,
        enabled: bool = True,
        *,
        host: str = "",
        client: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._api = api
        self._component = component
        self._host = host
        self._client = client or component
        self._enabled = enabled
        self._clock = clock or Clock()
        self.correlator = EventCorrelator(self._clock.now)
        self._pending: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._rng = random.Random()
        self.dropped = 0
        """Events recorded while MAX_QUEUED_EVENTS were already waiting (client-go logs and drops them)."""

    def record(
        self, involved: Obj, kind: EventKind, reason: str, message: str, *, field_path: str = ""
    ) -> None:
        if not self._enabled:
            return
        if kind not in EVENT_KINDS:
            log.error("unsupported event type %r (reason %s): not recorded", kind, reason)
            return
        if self._pending.qsize() >= MAX_QUEUED_EVENTS:
            self.dropped += 1
            log.warning("%s: too many queued events, dropped %s event", self._component, reason)
            return
        self._pending.put_nowait(
            self._make_event(object_reference(involved, field_path), kind, reason, message)
        )

    def _make_event(self, reference: dict[str, Any], kind: str, reason: str, message: str) -> dict[str, Any]:
        now = Clock.wall_time()
        source = {"component": self._component}
        if self._host:
            source["host"] = self._host
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": event_name(str(reference.get("name") or "")),
                "namespace": reference.get("namespace") or "default",
            },
            "involvedObject": reference,
            "reason": reason,
            "message": message,
            "source": source,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "type": kind,
            "eventTime": None,
            "reportingComponent": self._component,
            "reportingInstance": self._host,
        }

    async def run(self) -> None:
        while True:
            event = await self._pending.get()
            await self._record_to_sink(event)

    async def _record_to_sink(self, event: dict[str, Any]) -> None:
        result = self.correlator.correlate(event)
        if result.skip:
            return
        tries = 0
        while not await self._record_event(result.event, result.patch):
            tries += 1
            if tries >= MAX_TRIES_PER_EVENT:
                log.error(
                    "%s: unable to write event %s (retry limit exceeded)", self._component, event["reason"]
                )
                return
            delay = RETRY_SLEEP_SECONDS * (self._rng.random() if tries == 1 else 1.0)
            await self._clock.sleep(delay)

    async def _record_event(self, event: dict[str, Any], patch: dict[str, Any] | None) -> bool:
        """True when the event was written or is to be abandoned; False to retry it."""
        meta = event["metadata"]
        try:
            stored: dict[str, Any] | None = None
            if patch is not None:  # count > 1: an earlier identical event exists
                stored = await self._patch(meta, patch)
            if stored is None:
                meta.pop("resourceVersion", None)
                stored = await self._api.create(
                    "events", event, namespace=meta["namespace"], client=self._client
                )
        except ApiError as error:
            log.debug(
                "%s: server rejected event %s (not retried): %s", self._component, event["reason"], error
            )
            return True
        except (OSError, TimeoutError) as error:
            log.info("%s: unable to write event %s (will retry): %s", self._component, event["reason"], error)
            return False
        self.correlator.update_state(stored)
        return True

    async def _patch(self, meta: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any] | None:
        """The patched event, or None when it no longer exists (recordEvent then creates it)."""
        try:
            return await self._api.patch(
                "events",
                meta["name"],
                patch,
                patch_type="strategic",
                namespace=meta["namespace"],
                client=self._client,
            )
        except ApiError as error:
            if error.status == 404:
                return None
            raise
