"""The API calls the reconcilers make, in the shape they need them.

- A missing object (404) is None: it is gone, there is nothing to do.
- A retryable failure (429, 408, 5xx, connection) raises `Retry`: the key is retried with backoff.
- A write raises `NotLeading` unless this replica holds the Lease, checked before every write.
- A delete whose uid precondition fails (409) is None too: the pod of that uid is gone.
- `on_conflict`: the one loop that reads again and decides again when a write's precondition was stale
  (`stale_write`: a 409, or a JSON patch whose `test` failed).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

from kubekit.client import Kube, KubeError
from kubekit.controller import Leadership, NotLeading, Retry
from placement.objects import Obj, labels_of
from placement.patch import JsonPatch
from resizer.metrics import Metrics

T = TypeVar("T")

MAX_CONFLICT_ROUNDS = 5
TEST_FAILED = 422
"""A JSON patch whose `test` failed: what was tested (a scheduling gate, a Job's generation) changed under
us."""


def stale_write(error: KubeError) -> bool:
    """The API server refused a write because what it was decided on changed: a precondition (uid,
    resourceVersion) no longer holds (409), or a JSON patch's `test` failed (422)."""
    return error.conflict or error.status == TEST_FAILED


def rfc3339_now() -> str:
    """metav1.Time's format (a condition's lastTransitionTime): RFC 3339, UTC, seconds."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Api:
    def __init__(self, kube: Kube, metrics: Metrics, leadership: Leadership) -> None:
        self.kube = kube
        self.metrics = metrics
        self.leadership = leadership

    # --- reads -----------------------------------------------------------------------------------------

    def get_job(self, namespace: str, name: str) -> Obj | None:
        return self._call(self.kube.get_job, namespace, name)

    def get_pod(self, namespace: str, name: str) -> Obj | None:
        return self._call(self.kube.get_pod, namespace, name)

    def get_node_labels(self, name: str) -> Obj | None:
        """The Node as its name and labels (what a domain is read from)."""
        node = self._call(self.kube.get_node, name)
        return None if node is None else {"metadata": {"name": name, "labels": labels_of(node)}}

    # --- writes ----------------------------------------------------------------------------------------

    def ensure_leading(self) -> None:
        if not self.leadership.is_leader():
            raise NotLeading

    def patch_job(self, namespace: str, name: str, merge_patch: Obj) -> Obj | None:
        self.ensure_leading()
        return self._call(self.kube.patch_job, namespace, name, merge_patch)

    def json_patch_job(self, namespace: str, name: str, json_patch: JsonPatch) -> Obj | None:
        self.ensure_leading()
        return self._call(self.kube.json_patch_job, namespace, name, json_patch)

    def patch_pod(self, namespace: str, name: str, json_patch: JsonPatch) -> Obj | None:
        self.ensure_leading()
        return self._call(self.kube.patch_pod, namespace, name, json_patch)

    def patch_pod_status(self, namespace: str, name: str, strategic_merge_patch: Obj) -> Obj | None:
        self.ensure_leading()
        return self._call(self.kube.patch_pod_status, namespace, name, strategic_merge_patch)

    def delete_pod(self, namespace: str, name: str, uid: str) -> Obj | None:
        """The API server's answer, or None when no pod of that name and uid exists (404, 409)."""
        self.ensure_leading()
        try:
            return self._call(self.kube.delete_pod, namespace, name, uid)
        except KubeError as error:
            if not error.conflict:
                raise
            return None

    # --- conflicts -------------------------------------------------------------------------------------

    def on_conflict(
        self,
        obj: Obj | None,
        attempt: Callable[[Obj], T],
        reread: Callable[[], Obj | None],
    ) -> T | None:
        """`attempt(obj)` decides on `obj` and writes with a precondition; when the API server refuses it
        (`stale_write`), `obj` is read again (`reread`) and decided again, up to
        `MAX_CONFLICT_ROUNDS` times, then `Retry("conflict")` (client-go's `retry.RetryOnConflict`).
        None when `obj` is, or turns out to be, gone."""
        for _ in range(MAX_CONFLICT_ROUNDS):
            if obj is None:
                return None
            try:
                return attempt(obj)
            except KubeError as error:
                if not stale_write(error):
                    raise
                self.metrics.conflicts.inc()
            obj = reread()
        raise Retry("conflict")

    def _call(self, call: Callable[..., Obj], *args: object) -> Obj | None:
        try:
            return call(*args)
        except KubeError as error:
            if error.not_found:
                return None
            if error.retryable:
                self.metrics.errors.labels(error.label).inc()
                raise Retry(error.label) from error
            raise
