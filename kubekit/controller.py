"""One controller: a work queue of keys, its workers, and a reconciler that says what comes next.

controller-runtime's shape, kept apart from the reconcilers as controller-runtime keeps it (the resizer's
are in `resizer/`; its metrics are passed in as `ControllerMetrics`). Informer handlers only enqueue keys;
a worker takes a key (never one another worker holds), asks the reconciler, and acts on the `Result` it
returns:

- done: the key's backoff is forgotten (and a pending requeue of it dropped);
- requeue after N s: forgotten, and the key comes back after N s (0: at once);
- retry with backoff: the key comes back after its next exponential delay (`retries_total{reason}`).

A reconciler never touches the queue. What it raises:

- `Retry` (a transient API error, conflicts): a retry with backoff;
- `NotLeading` (a write by a replica that lost the Lease): done;
- `Permanent`, or an API error that sending the same request again cannot fix (`PERMANENT_STATUSES`:
  a malformed or invalid request): the key ends until its next event (controller-runtime's
  `TerminalError`), with one ERROR line and `errors_total{reason}`;
- anything else, an API error it does not know or an unexpected exception: a retry with the key's backoff,
  with one WARNING line (its traceback for an exception) and `errors_total{reason}`, as controller-runtime
  retries every error it is not told is terminal: a bug met once, or a refusal an operator then fixes
  (RBAC, a policy, a quota), does not leave a Job unresized until something else touches it.

A standby replica reconciles nothing: every key is enqueued again when it becomes the leader.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from kubekit.client import KubeError
from kubekit.counters import LabelledCounter
from kubekit.workqueue import ShutDown, WorkQueue

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Result:
    """What the loop does with a key after its reconcile."""

    requeue_after: float | None = None
    """Seconds after which to reconcile the key again (0: at once); None: only on its next event."""
    retry_reason: str | None = None
    """Set: retry with the key's exponential backoff; the reason labels `retries_total`."""
    error: Exception | None = None
    """The error that made it a retry, if one did (logged once, with the delay)."""

    @staticmethod
    def requeue(after: float) -> Result:
        return Result(requeue_after=max(0.0, after))

    @staticmethod
    def backoff(reason: str, error: Exception | None = None) -> Result:
        return Result(retry_reason=reason, error=error)


DONE = Result()


class Retry(Exception):
    """The key must be retried with backoff (the cause is a retryable API error, or conflicts)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotLeading(Exception):
    """A write was about to be sent by a replica that does not hold the Lease (any longer)."""


class Permanent(Exception):
    """An error retrying cannot fix: the key ends until its next event (controller-runtime's
    `TerminalError`)."""

    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(message or reason)
        self.reason = reason


PERMANENT_STATUSES = frozenset({400, 405, 413, 415, 422})
"""API answers to a request that is itself wrong (malformed, not allowed on the resource, too large,
invalid): the same request would get the same answer. A 422 of a `test` that failed is a conflict, handled
where the write is made (the resizer's `resizer.api.Api.on_conflict`); one that reaches the controller is
not."""


class ControllerMetrics(Protocol):
    """What the loop counts, by reason: re-queues with backoff (`retries`) and failed reconciles
    (`errors`). The caller names them (the resizer's `resizer.metrics.Metrics`)."""

    @property
    def retries(self) -> LabelledCounter: ...

    @property
    def errors(self) -> LabelledCounter: ...


class Leadership(Protocol):
    def is_leader(self) -> bool: ...


class Reconciler(Protocol):
    def reconcile(self, key: str) -> Result: ...


R = TypeVar("R", bound=Reconciler)


class Controller(Generic[R]):
    """A named reconciler with its own queue (its own key space) and workers."""

    def __init__(
        self,
        name: str,
        reconciler: R,
        queue: WorkQueue,
        metrics: ControllerMetrics,
        leadership: Leadership,
    ) -> None:
        self.name = name
        self.reconciler = reconciler
        self.queue = queue
        self.metrics = metrics
        self.leadership = leadership
        self._workers: list[threading.Thread] = []

    def enqueue(self, key: str | None) -> None:
        if key:
            self.queue.add(key)

    def __len__(self) -> int:
        return len(self.queue)

    # --- one key ---------------------------------------------------------------------------------------

    def process(self, key: str) -> Result:
        """Reconcile `key` and act on the result (a worker calls `queue.done` after)."""
        result = self._reconcile(key)
        if result.retry_reason is not None:
            delay = self.queue.retry(key)
            self.metrics.retries.labels(result.retry_reason).inc()
            extra = {"job": key, "reason": result.retry_reason}
            if result.error is None:
                log.info("retrying in %.2fs (%s)", delay, result.retry_reason, extra=extra)
            else:
                self.metrics.errors.labels(result.retry_reason).inc()
                log.warning(
                    "retrying in %.2fs after: %s",
                    delay,
                    result.error,
                    exc_info=None if isinstance(result.error, KubeError) else result.error,
                    extra=extra,
                )
            return result
        self.queue.forget(key)
        if result.requeue_after is not None:
            self.queue.add_after(key, result.requeue_after)
        return result

    def process_next(self, timeout: float | None = None) -> str | None:
        """Take the next key (waiting at most `timeout` s), reconcile it, hand it back; the key, or None when
        none came. Raises `ShutDown` once the queue is shut down."""
        key = self.queue.get(timeout)
        if key is None:
            return None
        try:
            self.process(key)
        finally:
            self.queue.done(key)
        return key

    def _reconcile(self, key: str) -> Result:
        if not self.leadership.is_leader():
            return DONE  # standby: keep caches warm; everything is re-enqueued on becoming leader
        try:
            return self.reconciler.reconcile(key)
        except Retry as retry:
            return Result.backoff(retry.reason)
        except NotLeading:
            log.info("lost the lease: not acting", extra={"job": key})
            return DONE
        except Permanent as error:
            return self._give_up(key, error.reason, error)
        except KubeError as error:
            if error.status in PERMANENT_STATUSES:
                return self._give_up(key, error.label, error)
            return Result.backoff(error.label, error)
        except Exception as error:
            return Result.backoff("unexpected", error)

    def _give_up(self, key: str, reason: str, error: Exception) -> Result:
        self.metrics.errors.labels(reason).inc()
        log.error("giving up on this change: %s", error, extra={"job": key, "reason": reason})
        return DONE

    # --- workers ---------------------------------------------------------------------------------------

    def start(self, workers: int) -> None:
        for number in range(workers):
            worker = threading.Thread(target=self._work, name=f"{self.name}-worker-{number}", daemon=True)
            worker.start()
            self._workers.append(worker)

    @property
    def started(self) -> bool:
        return bool(self._workers)

    def alive(self) -> bool:
        return bool(self._workers) and all(worker.is_alive() for worker in self._workers)

    def shut_down(self) -> None:
        """Hand out no more keys: workers end once their reconcile returns."""
        self.queue.shut_down()

    def join(self, deadline: float) -> None:
        """Wait for the workers until `deadline` (`time.monotonic()`)."""
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()))

    def _work(self) -> None:
        while True:
            try:
                self.process_next()
            except ShutDown:
                return
