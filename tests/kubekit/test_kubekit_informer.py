"""The shared informer over real HTTP against the fake API server of the unit tests: events, bookmarks,
resumes, a 410 as an ERROR event (as kube-apiserver sends it), failed, dropped and very short watches."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kubekit.client import Kube, Timeouts, build_api_client
from kubekit.informer import Informer, Store
from tests.support.builders import make_pod
from tests.support.fake_api import DROP, FakeKubeApi
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


def node(name: str, **labels: str) -> Obj:
    return {"metadata": {"name": name, "labels": labels, "managedFields": [{}]}}


def version_of(obj: Obj) -> str:
    return str(obj["metadata"]["resourceVersion"])


def watched_from(api: FakeKubeApi) -> list[str]:
    """The resourceVersion each watch of nodes started from, failed ones included."""
    return [call.query.get("resourceVersion", "") for call in api.calls_of("watch", "nodes")]


@contextmanager
def informing(api: FakeKubeApi, kube: Kube, **options: Any) -> Iterator[tuple[Informer, Recorder, list[str]]]:
    """An informer of nodes on `api`, listed before the block (unless a test holds or fails the list) and
    stopped after it; with what its handler was told and why each watch restarted."""
    recorder = Recorder()
    restarts: list[str] = []
    informer = Informer(
        kube,
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
        yield informer, recorder, restarts
    finally:
        informer.stop()
        informer.join(5)
    assert not informer.is_alive()


def synced(informer: Informer) -> None:
    assert informer.synced.wait(10), "the informer never listed"


def test_events_bookmarks_and_resumes_follow_the_resource_version(fake_api: FakeKubeApi, kube: Kube) -> None:
    listed = version_of(fake_api.put("nodes", node("a")))
    fake_api.end_watches(after=2, times=2)
    with informing(fake_api, kube) as (informer, recorder, restarts):
        synced(informer)
        fake_api.put("nodes", node("b"))
        mark = str(fake_api.bookmark())
        moved = version_of(fake_api.put("nodes", node("a", pool="p2")))
        gone = version_of(fake_api.delete("nodes", node("b")) or {})
        eventually(lambda: len(watched_from(fake_api)) >= 3, "the third watch")
    # Each watch resumes from the last version seen, a bookmark included; nothing is listed again.
    assert watched_from(fake_api)[:3] == [listed, mark, gone]
    assert fake_api.count("list", "nodes") == 1
    assert restarts[:2] == ["ended", "ended"]
    assert (recorder.upserts, recorder.deletes) == (["b", "a"], ["b"])
    assert informer.store.keys() == {"a"}
    assert informer.store.get("a") == {
        "metadata": {"name": "a", "resourceVersion": moved, "labels": {"pool": "p2"}}
    }


def test_gone_relists_and_reports_what_disappeared_meanwhile(fake_api: FakeKubeApi, kube: Kube) -> None:
    fake_api.put("nodes", node("a"))
    fake_api.put("nodes", node("b"))
    first_watch = fake_api.hold_next("watch", "nodes")
    with informing(fake_api, kube) as (informer, recorder, restarts):
        assert first_watch.arrived.wait(10), "the informer never watched"
        fake_api.delete("nodes", node("b"))
        fake_api.compact()  # the held watch now starts from a forgotten version
        first_watch.release()
        eventually(lambda: recorder.relists == 2, "the re-list")
    assert restarts[0] == "gone"
    assert fake_api.count("list", "nodes") == 2  # the 410 re-listed
    assert recorder.deletes == ["b"]  # b vanished between the lists: the handler hears of it
    assert informer.store.keys() == {"a"}


def test_keep_and_project_decide_what_is_cached(fake_api: FakeKubeApi, kube: Kube) -> None:
    fake_api.put("nodes", node("a", role="leader"))
    fake_api.put("nodes", node("b", role="follower"))
    with informing(
        fake_api,
        kube,
        keep=lambda obj: obj["metadata"]["labels"].get("role") == "leader",
        # The real client projects each listed page, and `keep` then sees projected objects: it must
        # still find what it reads there.
        project=lambda obj: {
            "metadata": {"name": obj["metadata"]["name"], "labels": obj["metadata"]["labels"]}
        },
    ) as (informer, recorder, _):
        synced(informer)
        assert informer.store.get("a") == {"metadata": {"name": "a", "labels": {"role": "leader"}}}
        assert informer.store.keys() == {"a"}
        fake_api.put("nodes", node("a", role="follower"))
        eventually(lambda: recorder.deletes == ["a"], "a dropped")  # stopped matching `keep`
    assert len(informer.store) == 0


def test_failures_back_off_and_resume_without_relisting(fake_api: FakeKubeApi, kube: Kube) -> None:
    listed = version_of(fake_api.put("nodes", node("listed")))
    fake_api.fail_next(500, verb="watch")
    fake_api.fail_next(DROP, verb="watch")
    with informing(fake_api, kube) as (_, _, restarts):
        eventually(lambda: len(watched_from(fake_api)) >= 3, "a third watch")
    assert restarts[:2] == ["500", "connection"]
    assert watched_from(fake_api)[:3] == [listed] * 3
    assert fake_api.count("list", "nodes") == 1


def test_a_dropped_stream_is_resumed_at_once_from_the_last_version(fake_api: FakeKubeApi, kube: Kube) -> None:
    listed = version_of(fake_api.put("nodes", node("listed")))
    fake_api.end_watches(after=1, times=1, abruptly=True)
    fake_api.end_watches(after=1, times=1)
    with informing(fake_api, kube) as (informer, _, restarts):
        synced(informer)
        a = version_of(fake_api.put("nodes", node("a")))
        b = version_of(fake_api.put("nodes", node("b")))
        eventually(lambda: len(restarts) >= 2, "the second watch ended")
    assert restarts[:2] == ["dropped", "ended"]  # no failure, so no backoff: the cache keeps following
    assert watched_from(fake_api)[:3] == [listed, a, b]
    assert fake_api.count("list", "nodes") == 1
    assert informer.store.keys() == {"listed", "a", "b"}


def test_a_watch_closed_at_once_without_events_counts_as_a_failure(fake_api: FakeKubeApi, kube: Kube) -> None:
    listed = version_of(fake_api.put("nodes", node("listed")))
    fake_api.end_watches(after=0, times=1)
    fake_api.end_watches(after=1, times=1)
    with informing(fake_api, kube) as (informer, _, restarts):
        synced(informer)
        a = version_of(fake_api.put("nodes", node("a")))
        eventually(lambda: len(restarts) >= 2, "the second watch ended")
    assert restarts[:2] == ["short", "ended"]  # client-go's "very short watch": backed off, not hammered
    assert watched_from(fake_api)[:3] == [listed, listed, a]


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
        fake_api.put("nodes", node("node-1"))
        eventually(lambda: informer.store.get("node-1") is not None, "node-1 cached")
        fake_api.compact()  # the next watch (after the 1 s server timeout) resumes from a forgotten version
        eventually(lambda: "gone" in restarts, "a 410")
        fake_api.put("nodes", node("node-2"))
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


def test_store_passed_in_is_the_one_filled(fake_api: FakeKubeApi, kube: Kube) -> None:
    fake_api.put("nodes", node("a"))
    store = Store()
    with informing(fake_api, kube, store=store) as (informer, _, _):
        synced(informer)
    assert informer.store is store
    assert store.keys() == {"a"}
