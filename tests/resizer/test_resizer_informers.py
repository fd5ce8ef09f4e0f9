"""Where each of the resizer's informers lists and watches: what its RBAC must grant, and where.

The chart's `resizer.namespace` binds the resizer's writes (and the reads of its own Jobs) in that one
namespace only, and keeps cluster-wide only the reads the informers below make in every namespace.
"""

from __future__ import annotations

from typing import Any

import pytest

from resizer.informers import resizer_informers
from tests.resizer.resizer_world import World
from tests.support.fake_api import WatchFeed

SERVED = "team-a"
EVERY_NAMESPACE = {"nodes", "domain-holders"}
"""Nodes are cluster-scoped; a bound exclusive pod of any namespace holds its domain against the
all-or-nothing queue's leaders (their anti-affinity has `namespaceSelector: {}`)."""


class RecordingFeed(WatchFeed):
    """A feed that records the namespace and field selector of every list the informer makes."""

    def __init__(self) -> None:
        super().__init__()
        self.listed: list[tuple[str | None, str | None]] = []

    def list_objects(self, resource: str, **selectors: Any) -> tuple[list[dict[str, Any]], str]:
        self.listed.append((selectors["namespace"], selectors.get("field_selector")))
        return super().list_objects(resource, **selectors)


def listed_namespaces(namespace: str | None, exempt: tuple[str, ...] = ()) -> dict[str, RecordingFeed]:
    """Each informer's feed once the resizer's informers, scoped to `namespace`, have listed."""
    feeds: dict[str, RecordingFeed] = {}

    def source(name: str) -> RecordingFeed:
        return feeds.setdefault(name, RecordingFeed())

    with World() as world:
        informers = resizer_informers(source, world.resizer, namespace=namespace, exempt_namespaces=exempt)
        for informer in informers:
            informer.start()
        try:
            for informer in informers:
                assert informer.synced.wait(10), f"informer {informer.name} never listed"
        finally:
            for informer in informers:
                informer.stop()
            for informer in informers:
                informer.join(10)
    return feeds


def test_scoped_to_a_namespace_only_nodes_and_domain_holders_are_listed_in_every_namespace() -> None:
    feeds = listed_namespaces(SERVED)
    assert len(feeds) == 8
    for name, feed in feeds.items():
        expected = None if name in EVERY_NAMESPACE else SERVED
        assert {namespace for namespace, _ in feed.listed} == {expected}, name


@pytest.mark.parametrize("namespace", [None, SERVED])
def test_domain_holders_leave_out_the_exempt_namespaces_wherever_they_list(namespace: str | None) -> None:
    feeds = listed_namespaces(namespace, exempt=("kube-system",))
    (listed,) = set(feeds["domain-holders"].listed)
    assert listed == (None, "spec.nodeName!=,metadata.namespace!=kube-system")


def test_unscoped_every_informer_lists_every_namespace() -> None:
    feeds = listed_namespaces(None)
    assert {name: {ns for ns, _ in feed.listed} for name, feed in feeds.items()} == {
        name: {None} for name in feeds
    }
