"""Informer: list, watch from the list's resourceVersion, re-list on 410 Gone, re-watch when a stream ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from kubesim.controllers.informer import Handlers, Informer
from kubesim.errors import ApiError
from kubesim.interface import WatchEvent
from tests.kubesim.controllers.ctrl_harness import Run
from tests.support.waiting import eventually_async


def _pod(name: str, rv: int, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv), "labels": labels}}


class ScriptedApi:
    """A fake API whose lists and watch streams play a script, recording what the informer asked for."""

    def __init__(
        self, lists: list[tuple[list[dict[str, Any]], str]], streams: list[list[WatchEvent] | ApiError]
    ):
        self.lists = lists
        self.streams = streams
        self.watched_from: list[str | None] = []
        self.listed = 0

    async def list(self, resource: str, **_: Any) -> tuple[list[dict[str, Any]], str]:
        self.listed += 1
        return self.lists.pop(0)

    def watch(
        self, resource: str, *, resource_version: str | None = None, **_: Any
    ) -> AsyncIterator[WatchEvent]:
        self.watched_from.append(resource_version)
        script = self.streams.pop(0) if self.streams else []
        return self._play(script)

    @staticmethod
    async def _play(script: Sequence[WatchEvent] | ApiError) -> AsyncIterator[WatchEvent]:
        if isinstance(script, ApiError):
            raise script
        for event in script:
            yield event
        if not script:
            await asyncio.sleep(3600)


def test_informer_relists_on_410_and_reports_what_changed_meanwhile(run: Run) -> None:
    async def scenario() -> None:
        api = ScriptedApi(
            lists=[([_pod("a", 1), _pod("b", 2)], "2"), ([_pod("a", 5, x="y"), _pod("c", 6)], "6")],
            streams=[
                [{"type": "MODIFIED", "object": _pod("a", 3)}, {"type": "BOOKMARK", "object": _pod("", 4)}],
                ApiError(410, "Expired", "too old resource version: 4 (5)"),
            ],
        )
        seen: list[tuple[str, str]] = []
        informer = Informer(api, "pods")  # type: ignore[arg-type]
        informer.add_index("x", lambda o: [o["metadata"].get("labels", {}).get("x", "")])
        informer.add_handlers(
            Handlers(
                on_add=lambda o: seen.append(("add", o["metadata"]["name"])),
                on_update=lambda _old, o: seen.append(("update", o["metadata"]["name"])),
                on_delete=lambda o: seen.append(("delete", o["metadata"]["name"])),
            )
        )
        task = asyncio.create_task(informer.run())
        await eventually_async(
            lambda: api.listed == 2 and len(api.watched_from) == 3,
            lambda: f"two lists and three watches (listed {api.listed}, watched from {api.watched_from})",
            5,
        )
        task.cancel()
        assert api.watched_from == ["2", "4", "6"]  # stream ended: re-watch from the bookmark; 410: re-list
        assert seen == [
            ("add", "a"),
            ("add", "b"),
            ("update", "a"),
            ("update", "a"),
            ("add", "c"),
            ("delete", "b"),
        ]
        assert sorted(informer.store) == ["ns/a", "ns/c"]
        assert [o["metadata"]["name"] for o in informer.by_index("x", "y")] == ["a"]

    run(scenario())


def test_assume_applies_a_write_at_once_and_ignores_older_versions() -> None:
    informer = Informer(ScriptedApi([], []), "pods")  # type: ignore[arg-type]
    seen: list[str] = []
    informer.add_handlers(
        Handlers(on_add=lambda o: seen.append("add"), on_update=lambda _o, n: seen.append("update"))
    )
    informer.assume(_pod("a", 7))
    informer.assume(_pod("a", 7))  # the watch event of the same write
    informer.assume(_pod("a", 5))  # an older version
    assert seen == ["add"]
    assert informer.get("ns/a")["metadata"]["resourceVersion"] == "7"  # type: ignore[index]
