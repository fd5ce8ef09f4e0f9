"""The informer's Store: the secondary index follows updates and deletes."""

from __future__ import annotations

from typing import Any

from placement.resize import owner_job_key
from resizer.informer import Store, slim


def pod(name: str, job: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "ownerReferences": [{"kind": "Job", "name": job, "uid": f"uid-{job}", "controller": True}],
            "managedFields": [{"manager": "kubectl"}],
        }
    }


def test_index_follows_upsert_move_and_delete() -> None:
    store = Store(index=owner_job_key)
    store.upsert(pod("a", "job-1"))
    store.upsert(pod("b", "job-1"))
    assert sorted(p["metadata"]["name"] for p in store.by_index("ns/job-1")) == ["a", "b"]
    store.upsert(pod("b", "job-2"))  # same pod, now indexed elsewhere
    assert [p["metadata"]["name"] for p in store.by_index("ns/job-1")] == ["a"]
    assert [p["metadata"]["name"] for p in store.by_index("ns/job-2")] == ["b"]
    assert store.delete("ns/a") is not None
    assert store.by_index("ns/job-1") == []
    assert sorted(store.index_values()) == ["ns/job-2"]
    assert len(store) == 1
    assert store.delete("ns/missing") is None


def test_slim_drops_managed_fields() -> None:
    assert "managedFields" not in slim(pod("a", "j"))["metadata"]
