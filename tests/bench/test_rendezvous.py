"""The gang rendezvous the benchmark plays on kwok (bench.rendezvous): which pods it starts, and when."""

from __future__ import annotations

from typing import Any

from bench.rendezvous import Rendezvous
from bench.scenarios import GANG_ANNOTATION, GANG_SIZE_ANNOTATION


def pod(name: str, phase: str, *, gang: str | None = "gang-0", size: int = 3, **meta: Any) -> dict[str, Any]:
    annotations = {GANG_ANNOTATION: gang, GANG_SIZE_ANNOTATION: str(size)} if gang else {}
    return {
        "metadata": {"name": name, "namespace": "ns", "annotations": annotations, **meta},
        "status": {"phase": phase},
    }


def test_a_gang_starts_all_at_once_the_moment_its_last_member_runs() -> None:
    rendezvous = Rendezvous()
    assert rendezvous.observe("ADDED", pod("a", "Pending")) == []
    assert rendezvous.observe("MODIFIED", pod("a", "Running")) == []
    assert rendezvous.observe("MODIFIED", pod("b", "Running")) == []
    assert rendezvous.observe("MODIFIED", pod("b", "Running")) == []  # a repeat changes nothing
    assert rendezvous.observe("MODIFIED", pod("c", "Running")) == ["ns/a", "ns/b", "ns/c"]
    assert rendezvous.observe("MODIFIED", pod("c", "Running")) == []  # started once


def test_a_gang_missing_a_member_never_starts() -> None:
    rendezvous = Rendezvous()
    rendezvous.observe("MODIFIED", pod("a", "Running"))
    rendezvous.observe("MODIFIED", pod("b", "Running"))
    assert rendezvous.observe("DELETED", pod("b", "Running")) == []
    assert rendezvous.observe("MODIFIED", pod("b2", "Pending")) == []
    assert rendezvous.observe("MODIFIED", pod("c", "Running", deletionTimestamp="2026-12-01T00:00:00Z")) == []
    assert rendezvous.gangs["ns/gang-0"].started is False


def test_a_member_that_runs_after_its_gang_started_starts_at_once() -> None:
    rendezvous = Rendezvous()
    for name in ("a", "b", "c"):
        rendezvous.observe("MODIFIED", pod(name, "Running"))
    assert rendezvous.observe("MODIFIED", pod("d", "Running")) == ["ns/d"]


def test_gangs_are_counted_apart_and_other_pods_are_none_of_its_business() -> None:
    rendezvous = Rendezvous()
    assert rendezvous.observe("MODIFIED", pod("x", "Running", gang=None)) == []
    assert rendezvous.observe("MODIFIED", pod("a", "Running", gang="one", size=2)) == []
    assert rendezvous.observe("MODIFIED", pod("b", "Running", gang="two", size=2)) == []
    assert rendezvous.observe("MODIFIED", pod("c", "Running", gang="one", size=2)) == ["ns/a", "ns/c"]
