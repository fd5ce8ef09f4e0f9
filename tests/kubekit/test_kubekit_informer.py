"""The shared informer: event handling on a scripted API (deterministic), then over real HTTP against the
fake API server of the unit tests (a 410 as an ERROR event, as kube-apiserver sends it)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from kubekit.client import Kube, KubeError, Resource, Timeouts, build_api_client
from kubekit.informer import Informer, Store
from tests.support.builders import make_pod
from tests.support.fake_api import FakeKubeApi
from tests.support.waiting import eventually

Obj = dict[str, Any]


class Recorder:
    """A handler that records what it was told."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.upserts: list[str] = []
        self.deletes: list[str] = []
        self.relists = 0

    def on_upsert(self, old: Obj | None, new: Obj) -> None:
        with self.lock:
            self.upserts.append(new["metadata"]["name"])

    def on_delete(self, old: Obj) -> None:
        with self.lock:
            self.deletes.append(old["metadata"]["name"])

    def on_relist(self, objects: list[Obj]) -> None:
        with self.lock:
            self.relists += 1


def node(name: str, version: str, **labels: str) -> Obj:
    return {"metadata": {"name": name, "resourceVersion": version, "labels": labels, "managedFields": [{}]}}


class ScriptedStream:
    """Yields its events; an exception among them is raised there (a connection that breaks mid-stream)."""

    def __init__(self, events: list[Obj | Exception]) -> None:
        self.events = events

    def __iter__(self) -> Iterator[Obj]:
        for event in self.events:
            if isinstance(event, Exception):
                raise event
            yield event

    def close(self) -> None:
        return None

    def interrupt(self) -> None:
        return None


class ScriptedApi:
    """Each list returns the next of `lists` (the last one again when they run out); each watch serves the
    next scripted stream or raises the next error; records the resourceVersion of every watch."""

    def __init__(self, lists: list[list[Obj]], watches: list[list[Obj | Exception] | KubeError]) -> None:
        self.lists = lists
        self.watches = watches
        self.list_calls = 0
        self.watched_from: list[str] = []
        self.done = threading.Event()

    def list_objects(self, resource: Resource, **_selectors: Any) -> tuple[list[Obj], str]:
        listed = self.lists[min(self.list_calls, len(self.lists) - 1)]
        self.list_calls += 1
        return list(listed), "10"

    def watch(self, resource: Resource, *, resource_version: str, **_selectors: Any) -> ScriptedStream:
        self.watched_from.append(resource_version)
        if not self.watches:
            self.done.set()
            raise KubeError(503, "ServiceUnavailable", "script over")
        step = self.watches.pop(0)
        if isinstance(step, KubeError):
            raise step
        return ScriptedStream(step)


def run_script(api: ScriptedApi, **options: Any) -> tuple[Informer, Recorder, list[str]]:
    recorder = Recorder()
    restarts: list[str] = []
    informer = Informer(
        api,
        "nodes",
        name="nodes",
        namespace=None,
        label_selector=None,
        handler=recorder,
        on_restart=lambda _name, reason: restarts.append(reason),
        max_backoff=0.01,
        **options,
    )
    informer.start()
    try:
        assert api.done.wait(10), "the script did not run to its end"
    finally:
        informer.stop()
        informer.join(5)
    return informer, recorder, restarts


def test_events_bookmarks_and_resumes_follow_the_resource_version() -> None:
    api = ScriptedApi(
        lists=[[node("a", "9")]],
        watches=[
            [
                {"type": "ADDED", "object": node("b", "11")},
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}},
            ],
            [
                {"type": "MODIFIED", "object": node("a", "16", pool="p2")},
                {"type": "DELETED", "object": node("b", "17")},
            ],
        ],
    )
    informer, recorder, restarts = run_script(api)
    # Each watch resumes from the last version seen, a bookmark included; nothing is listed again.
    assert api.watched_from[:3] == ["10", "15", "17"]
    assert api.list_calls == 1
    assert restarts[:2] == ["ended", "ended"]
    assert (recorder.upserts, recorder.deletes) == (["b", "a"], ["b"])
    assert informer.store.keys() == {"a"}
    assert informer.store.get("a") == {
        "metadata": {"name": "a", "resourceVersion": "16", "labels": {"pool": "p2"}}
    }


def test_gone_relists_and_reports_what_disappeared_meanwhile() -> None:
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
    api = ScriptedApi(lists=[[node("a", "9"), node("b", "9")], [node("a", "9")]], watches=[[gone]])
    informer, recorder, restarts = run_script(api)
    assert restarts[0] == "gone"
    assert api.list_calls == 2  # the 410 re-listed
    assert recorder.deletes == ["b"]  # b vanished between the lists: the handler hears of it
    assert recorder.relists == 2
    assert informer.store.keys() == {"a"}


def test_keep_and_project_decide_what_is_cached() -> None:
    api = ScriptedApi(
        lists=[[node("a", "9", role="leader"), node("b", "9", role="follower")]],
        watches=[[{"type": "MODIFIED", "object": node("a", "11", role="follower")}]],
    )
    informer, recorder, _ = run_script(
        api,
        keep=lambda obj: obj["metadata"]["labels"].get("role") == "leader",
        project=lambda obj: {"metadata": {"name": obj["metadata"]["name"]}},
    )
    assert recorder.deletes == ["a"]  # stopped matching `keep`: dropped from the cache
    assert len(informer.store) == 0


def test_failures_back_off_and_resume_without_relisting() -> None:
    api = ScriptedApi(
        lists=[[]], watches=[KubeError(500, "InternalError"), KubeError(None, "ConnectionResetError")]
    )
    _, _, restarts = run_script(api)
    assert restarts[:2] == ["500", "connection"]
    assert api.watched_from[:3] == ["10", "10", "10"]
    assert api.list_calls == 1


def test_a_dropped_stream_is_resumed_at_once_from_the_last_version() -> None:
    api = ScriptedApi(
        lists=[[]],
        watches=[
            [{"type": "ADDED", "object": node("a", "11")}, ConnectionResetError("reset by peer")],
            [{"type": "ADDED", "object": node("b", "12")}],
        ],
    )
    informer, _, restarts = run_script(api)
    assert restarts[:2] == ["dropped", "ended"]  # no failure, so no backoff: the cache keeps following
    assert api.watched_from[:3] == ["10", "11", "12"]
    assert api.list_calls == 1
    assert informer.store.keys() == {"a", "b"}


def test_a_watch_closed_at_once_without_events_counts_as_a_failure() -> None:
    api = ScriptedApi(lists=[[]], watches=[[], [{"type": "ADDED", "object": node("a", "11")}]])
    _, _, restarts = run_script(api)
    assert restarts[:2] == ["short", "ended"]  # client-go's "very short watch": backed off, not hammered
    assert api.watched_from[:3] == ["10", "10", "11"]


def kube_for(url: str) -> Kube:
    return Kube(build_api_client(None, url, user_agent="test"), Timeouts(read=5, watch_server_seconds=1))


def test_a_410_error_event_relists_over_http(fake_api: FakeKubeApi) -> None:
    restarts: list[str] = []
    kube = kube_for(fake_api.url)
    informer = Informer(
        kube,
        "nodes",
        name="nodes",
        namespace=None,
        label_selector=None,
        on_restart=lambda _name, reason: restarts.append(reason),
    )
    informer.start()
    try:
        eventually(informer.synced.is_set, "the first list")
        fake_api.put("nodes", node("node-1", "0"))
        eventually(lambda: informer.store.get("node-1") is not None, "node-1 cached")
        fake_api.compact()  # the next watch (after the 1 s server timeout) resumes from a forgotten version
        eventually(lambda: "gone" in restarts, "a 410")
        fake_api.put("nodes", node("node-2", "0"))
        eventually(lambda: informer.store.get("node-2") is not None, "node-2 cached after the re-list")
    finally:
        informer.stop()
        informer.join(5)
        kube.close()
    assert not informer.is_alive()


def test_an_unreachable_api_is_retried_and_never_synced() -> None:
    with FakeKubeApi() as api:
        url = api.url
    restarts: list[str] = []
    kube = kube_for(url)
    informer = Informer(
        kube,
        "nodes",
        name="nodes",
        namespace=None,
        label_selector=None,
        on_restart=lambda _name, reason: restarts.append(reason),
    )
    informer.start()
    try:
        eventually(lambda: restarts.count("connection") >= 2, "two failed attempts")
        assert not informer.synced.is_set()
    finally:
        informer.stop()
        informer.join(5)
        kube.close()


def pod(name: str, app: str) -> Obj:
    return make_pod(name, None).label("app", app).obj()


def test_store_passed_in_is_the_one_filled() -> None:
    store = Store()
    api = ScriptedApi(lists=[[node("a", "9")]], watches=[])
    informer, _, _ = run_script(api, store=store)
    assert informer.store is store
    assert store.keys() == {"a"}
