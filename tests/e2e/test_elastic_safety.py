"""elastic in the situations kubesim now models as a real cluster does (README "Risks"):

- a JobSet with `startupPolicy: InOrder`: JobSet counts a child Job ready from its current parallelism, so
  a shrunk Job would start the next replicated Job once its leader alone is ready; such Jobs keep their
  size (gate) and the next replicated Job starts only once the previous one is ready for real;
- Jobs whose `maxFailedIndexes` or `successPolicy` the API server rejects at size 1 (422, which JobSet
  retried forever): maxFailedIndexes is lowered and restored by the resize, successPolicy falls back;
- a leader re-created in another domain: the resizer deletes the followers still pinned to the old one
  (JobSet's pod reconciler does the same), and the Job runs whole in the new domain.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import httpx
import pytest

from devstack.commands import KubesimFlags
from devstack.scenario import ensure_namespace
from devstack.stack import Stack
from tests.e2e.elastic_safety_support import (
    an_ordered_jobset_starts_in_order,
    followers_pinned_where_a_re_created_leader_is_not_are_repaired,
    jobs_the_api_server_would_reject_at_size_one_run_whole,
)
from tests.support.metrics import resizer_metric

pytestmark = pytest.mark.e2e


@contextlib.contextmanager
def no_resizer_started(stack: Stack) -> Iterator[None]:
    """The stack was started without a resizer, and none is added."""
    yield


@contextlib.contextmanager
def resizer_added_after(stack: Stack) -> Iterator[None]:
    """The stack was started without a resizer; one is added after the block."""
    yield
    stack.add_resizer()


def test_in_order_jobsets_are_not_shrunk_and_start_in_order(stack_factory: Callable[..., Stack]) -> None:
    # No resizer at all: the leaders get Ready before any resize could happen (a resizer restarting, or
    # slower than a pod's start-up).
    stack = stack_factory(resizer_replicas=0)
    namespace = "in-order"
    ensure_namespace(stack.client, namespace)
    an_ordered_jobset_starts_in_order(
        stack, namespace, "InOrder", without_resizer=no_resizer_started, ignoring=(httpx.HTTPError,)
    )


def test_jobs_the_api_server_would_reject_at_size_one_run_whole(stack: Stack) -> None:
    namespace = "validation"
    ensure_namespace(stack.client, namespace)
    jobs_the_api_server_would_reject_at_size_one_run_whole(stack, namespace, ignoring=(httpx.HTTPError,))


def test_followers_pinned_where_a_re_created_leader_is_not_are_repaired(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory(cluster=KubesimFlags(nodes=4, pools=2, time_scale=0.05), resizer_replicas=0)
    namespace = "repair"
    ensure_namespace(stack.client, namespace)
    followers_pinned_where_a_re_created_leader_is_not_are_repaired(
        stack, namespace, without_resizer=resizer_added_after, ignoring=(httpx.HTTPError,)
    )
    assert resizer_metric(stack, "follower_repairs_total") == 2  # the stack's one resizer, started for it
