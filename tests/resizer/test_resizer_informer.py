"""The informer against kubesim over real HTTP with the official client: list+watch, 410 → re-list."""

from __future__ import annotations

import threading
from typing import Any

from resizer_cluster import Kubesim, wait_for

from resizer.informer import Informer
from resizer.kube import Kube, Timeouts, build_api_client

Obj = dict[str, Any]


class Recorder:
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


def pod(name: str, role: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": role}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def test_informer_relists_after_410_and_keeps_an_exact_cache() -> None:
    # A short watch history and watches cut every ~0.3 s: resuming from an old version must hit 410.
    sim = Kubesim(
        controllers=False, watch_history=20, bookmark_interval=60.0, faults="drop-watch-after=0.2-0.4", seed=3
    )
    sim.start()
    kube = Kube(build_api_client(None, sim.url, 4, "test"), Timeouts(read=10, watch_server_seconds=30))
    recorder = Recorder()
    restarts: list[str] = []
    informer = Informer(
        kube,
        "pods",
        name="watched",
        namespace="default",
        label_selector="app=watched",
        handler=recorder,
        on_restart=lambda _name, reason: restarts.append(reason),
    )
    try:
        sim.request("POST", "/api/v1/namespaces/default/pods", json=pod("before", "watched"))
        informer.start()
        wait_for("the first list", informer.synced.is_set, 30)
        assert informer.store.get("default/before") is not None
        # Churn of unrelated pods pushes the informer's last version out of the history.
        for index in range(60):
            sim.request("POST", "/api/v1/namespaces/default/pods", json=pod(f"noise-{index}", "noise"))
        wait_for("a 410 and a re-list", lambda: "gone" in restarts, 30)
        sim.request("POST", "/api/v1/namespaces/default/pods", json=pod("after", "watched"))
        sim.request("DELETE", "/api/v1/namespaces/default/pods/before")
        wait_for("the new pod cached", lambda: informer.store.get("default/after") is not None, 30)
        wait_for("the deleted pod gone", lambda: informer.store.get("default/before") is None, 30)
        assert recorder.relists >= 2
        assert len(informer.store) == 1
        assert not any(name.startswith("noise") for name in recorder.upserts)
    finally:
        informer.stop()
        informer.join(5)
        kube.close()
        sim.stop()
    assert not informer.is_alive()
