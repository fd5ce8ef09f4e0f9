"""elastic where the real API server and JobSet's real controller judge the shrunk Job (README "Risks"):

- `maxFailedIndexes` above 1 (with `backoffLimitPerIndex`) is invalid at size 1 (kube-apiserver answers
  422): the webhook lowers it to 1 and the resize restores it; a `successPolicy` with `succeededCount` 4 is
  invalid at size 1 and immutable, so that Job falls back to `gate`. JobSet creates both without one
  `JobCreationFailed`;
- `startupPolicy: InOrder` and `dependsOn` (status Ready): JobSet counts a child Job ready from its current
  parallelism, so a shrunk Job would start the next replicated Job once its leader alone is ready. The
  Jobs whose readiness is waited for keep their size (gate), and JobSet creates the driver only once every
  worker pod is ready. No resizer runs until the driver exists, so nothing could grow a shrunk worker
  before JobSet looks at it.
"""

from __future__ import annotations

import pytest

from devstack.kube import KubeError
from devstack.stack import Stack
from tests.e2e.elastic_safety_support import (
    an_ordered_jobset_starts_in_order,
    jobs_the_api_server_would_reject_at_size_one_run_whole,
)
from tests.kube.kube_support import resizer_stopped

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-job-safety")]


def test_jobs_the_api_server_would_reject_at_size_one_run_whole(kube_stack: Stack, namespace: str) -> None:
    jobs_the_api_server_would_reject_at_size_one_run_whole(kube_stack, namespace, ignoring=(KubeError,))


@pytest.mark.parametrize("order", ["InOrder", "dependsOn"])
def test_ordered_jobsets_are_not_shrunk_and_start_in_order(
    kube_stack: Stack, namespace: str, order: str
) -> None:
    an_ordered_jobset_starts_in_order(
        kube_stack, namespace, order, without_resizer=resizer_stopped, ignoring=(KubeError,)
    )
