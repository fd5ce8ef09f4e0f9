"""Client-side rate limits: client-go's token bucket per component client, in simulated time."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesim.apiserver.server import ApiServer
from kubesim.controllers import Controllers, ControllerSettings
from kubesim.controllers.client import ComponentClient, TokenBucket
from kubesim.controllers.informer import Handlers
from kubesim.stats import Stats
from tests.kubesim.controllers.ctrl_harness import Run, cluster, indexed_job, pod_spec


class FakeClock:
    """Simulated time that only moves when someone sleeps (or the test sets it)."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += max(0.0, seconds)


@pytest.mark.parametrize(
    ("qps", "burst", "calls", "delays"),
    [
        # starts full at burst, then one token every 1/qps seconds, served in arrival order
        (2.0, 3, [0, 0, 0, 0, 0], [0, 0, 0, 0.5, 1.0]),
        # refills at qps but never beyond burst, however long it sat idle
        (2.0, 3, [0, 0, 0, 10, 10, 10, 10], [0, 0, 0, 0, 0, 0, 0.5]),
        # a reservation is taken at once: a later caller queues behind the earlier ones' debt
        (1.0, 1, [0, 0, 0.5], [0, 1.0, 1.5]),
        # a partial refill is spent before a caller has to wait
        (4.0, 2, [0, 0, 0.25, 0.25], [0, 0, 0, 0.25]),
    ],
    ids=["starts-full", "capped-at-burst", "fifo-debt", "partial-refill"],
)
def test_token_bucket_reserves_like_client_go(
    qps: float, burst: int, calls: list[float], delays: list[float]
) -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps, burst, clock)
    got = []
    for at in calls:
        clock.t = at
        got.append(bucket.reserve())
    assert got == pytest.approx(delays)


def test_token_bucket_wait_sleeps_the_reservation(run: Run) -> None:
    clock = FakeClock()
    bucket = TokenBucket(10.0, 1, clock)

    async def scenario() -> list[float]:
        return [await bucket.wait() for _ in range(3)]

    assert run(scenario()) == pytest.approx([0, 0.1, 0.1])
    assert clock.t == pytest.approx(0.2)


@pytest.mark.parametrize(("qps", "burst"), [(0.0, 1), (-1.0, 1), (5.0, 0)])
def test_token_bucket_rejects_a_budget_client_go_refuses(qps: float, burst: int) -> None:
    with pytest.raises(ValueError, match=r"qps|burst"):
        TokenBucket(qps, burst, FakeClock())


def test_a_component_client_throttles_then_adds_its_latency_and_counts_the_wait(run: Run) -> None:
    clock = FakeClock()
    stats = Stats()
    server = ApiServer(stats, seed=0)
    arrivals: list[float] = []
    client = ComponentClient(
        server, "job-controller", clock=clock, stats=stats, bucket=TokenBucket(1.0, 1, clock), latency=0.5
    )

    async def scenario() -> None:
        for _ in range(5):
            client.watch("pods")  # never throttled: takes no token
        for name in ("a", "b"):
            await client.create("namespaces", {"metadata": {"name": name}})
            arrivals.append(clock.t)
        await server.aclose()

    run(scenario())
    # a: a token at once, then 0.5 s round trip; b: waits 0.5 s for the refill, then its round trip
    assert arrivals == pytest.approx([0.5, 1.5])
    assert stats.snapshot()["client_throttling"] == {
        "job-controller": {"throttled": 1, "waited_seconds": 0.5}
    }


def test_each_component_gets_upstreams_default_budget(run: Run) -> None:
    async def scenario() -> dict[str, tuple[float, int]]:
        server = ApiServer(Stats(), seed=0)
        controllers = Controllers(server, ControllerSettings(), Stats(), admission=server.admission)
        await server.aclose()
        return {
            name: (client.bucket.qps, client.bucket.burst)
            for name, client in controllers.clients.items()
            if client.bucket is not None
        }

    assert run(scenario()) == {
        "job-controller": (20.0, 30),  # kube-controller-manager --kube-api-qps / --kube-api-burst
        "scheduler": (50.0, 100),  # KubeSchedulerConfiguration clientConnection
        "scheduler-events": (50.0, 100),  # kube-scheduler's second clientset, for Events
        "jobset-controller": (500.0, 500),  # jobset main.go --kube-api-qps / --kube-api-burst
    }


SIZE = 120


def _creation_time(run: Run, *, virtual_time: bool, **settings: Any) -> tuple[float, int, dict[str, Any]]:
    """Simulated seconds from creating a SIZE-pod Indexed Job until its last pod exists, the Job
    controller's requests that reached the API server by then, and the throttling counters.

    In virtual time (on `run_virtual_time`) the simulated seconds are exact; otherwise (time scale 1)
    they are the wall clock's."""

    async def scenario() -> tuple[float, int, dict[str, Any]]:
        async with cluster(
            nodes=16,
            pools=2,
            components=("job-controller",),
            virtual_time=virtual_time,
            time_scale=1.0,
            **settings,
        ) as c:
            clock = c.controllers.clock
            created: list[str] = []
            done = asyncio.Event()
            finished: list[tuple[float, int]] = []

            def pod_added(pod: dict[str, Any]) -> None:
                created.append(pod["metadata"]["name"])
                if len(created) == SIZE:
                    finished.append((clock.now(), c.stats.by_client["job-controller"]))
                    done.set()

            c.controllers.pods.add_handlers(Handlers(on_add=pod_added))
            started = clock.now()
            job = indexed_job("big", SIZE, spec=pod_spec(gpus=0, cpu="100m"))
            await c.server.create("jobs", job, namespace="default")
            await asyncio.wait_for(done.wait(), 60)
            at, requests = finished[0]
            return at - started, requests, c.stats.snapshot()["client_throttling"]

    result: tuple[float, int, dict[str, Any]] = run(scenario())
    return result


LAST_ROUND_TRIP = (
    ControllerSettings().api_request_latency_seconds + ControllerSettings().watch_delivery_seconds
)
"""After its token, the last create's round trip and its watch event's delivery to the pod informer."""


def test_a_120_pod_job_is_created_at_the_job_controllers_qps(run_virtual_time: Run) -> None:
    elapsed, requests, throttling = _creation_time(run_virtual_time, virtual_time=True)
    # its creates, and the events and status writes sent meanwhile, beyond the burst of 30, at 20/s: the
    # client always has waiters, so the bucket sets the pace exactly
    predicted = (requests - 30) / 20
    assert requests > SIZE
    assert elapsed == pytest.approx(predicted + LAST_ROUND_TRIP), (elapsed, predicted, requests)
    assert throttling["job-controller"]["throttled"] >= requests - 30 - 2 * 7  # 7 slow-start batches
    assert throttling["job-controller"]["waited_seconds"] > predicted


def test_raising_the_qps_setting_shortens_the_creation(run_virtual_time: Run) -> None:
    elapsed, requests, _ = _creation_time(run_virtual_time, virtual_time=True, job_controller_api_qps=100.0)
    predicted = (requests - 30) / 100
    assert elapsed == pytest.approx(predicted + LAST_ROUND_TRIP), (elapsed, predicted, requests)


@pytest.mark.slow
def test_print_the_creation_time_at_time_scale_1(run: Run) -> None:
    """The figure quoted in docs/kubesim-fidelity.md: `pytest -m slow -s <this file>`."""
    elapsed, requests, throttling = _creation_time(run, virtual_time=False)
    print(
        f"\n{SIZE}-pod Indexed Job fully created in {elapsed:.2f} s at time scale 1 "
        f"({requests} job-controller requests by then; throttling {throttling['job-controller']})"
    )
    assert elapsed >= (requests - 30) / 20 - 1e-6
