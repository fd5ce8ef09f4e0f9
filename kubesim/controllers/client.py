"""Each component's API client: client-go's client-side rate limit, then the request's round trip.

Upstream every component talks to kube-apiserver through its own clientset, and a clientset owns one token
bucket (client-go kubernetes/clientset.go `NewForConfigAndClient` builds
`flowcontrol.NewTokenBucketRateLimiter(QPS, Burst)` once, shared by all its API groups). Before sending a
request, rest/request.go `tryThrottle` blocks in the bucket's `Wait`; watches are never throttled
(rest/request.go `Watch`). The bucket is golang.org/x/time/rate's: it starts full at `burst`, refills at
`qps` tokens per second up to `burst`, and each `Wait` reserves a token at once (the balance may go
negative) and sleeps until that reservation is due, so waiters are served in arrival order.

`TokenBucket` is that bucket in simulated time; `ComponentClient` wraps the in-process `KubeApi` with one
bucket and a fixed request latency. Both are measured in simulated seconds, so `--time-scale` compresses
them like every other delay.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from kubesim.interface import KubeApi, PatchType, WatchEvent
from kubesim.stats import Stats


class SimulatedTime(Protocol):
    """What the bucket needs from a clock (`kubesim.clock.Clock`, or a fake in tests)."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class TokenBucket:
    """flowcontrol.NewTokenBucketRateLimiter(qps, burst): starts full, refills at `qps`, caps at `burst`."""

    def __init__(self, qps: float, burst: int, clock: SimulatedTime) -> None:
        if not qps > 0:
            raise ValueError(f"qps must be > 0, got {qps!r}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1 when qps is set, got {burst!r}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock.now()

    def reserve(self) -> float:
        """Take one token now; returns the simulated seconds until it is due (0 when one was available)."""
        now = self._clock.now()
        if now > self._last:
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def wait(self) -> float:
        """Block until a token is due (client-go's `Wait`); returns the simulated seconds waited."""
        delay = self.reserve()
        if delay > 0:
            await self._clock.sleep(delay)
        return delay


class ComponentClient:
    """A `KubeApi` for one component: its token bucket (None = unthrottled), then `latency` per request.

    The latency stands for the round trip through kube-apiserver and the etcd commit; it is spent before the
    request reaches kubesim's API server, so admission, the commit and the watch event happen when the
    response would arrive. Throttled requests are counted in `Stats` under `name`.
    """

    def __init__(
        self,
        api: KubeApi,
        name: str,
        *,
        clock: SimulatedTime,
        stats: Stats,
        bucket: TokenBucket | None,
        latency: float = 0.0,
    ) -> None:
        self.name = name
        self.bucket = bucket
        self._api = api
        self._clock = clock
        self._stats = stats
        self._latency = latency

    async def _send(self) -> None:
        if self.bucket is not None:
            waited = await self.bucket.wait()
            if waited > 0:
                self._stats.count_throttled(self.name, waited)
        if self._latency > 0:
            await self._clock.sleep(self._latency)

    async def create(
        self,
        resource: str,
        obj: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
        client: str = "controller",
    ) -> dict[str, Any]:
        await self._send()
        return await self._api.create(
            resource, obj, namespace=namespace, subresource=subresource, dry_run=dry_run, client=client
        )

    async def get(
        self, resource: str, name: str, *, namespace: str | None = None, client: str = "controller"
    ) -> dict[str, Any]:
        await self._send()
        return await self._api.get(resource, name, namespace=namespace, client=client)

    async def list(
        self,
        resource: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        client: str = "controller",
    ) -> tuple[list[dict[str, Any]], str]:
        await self._send()
        return await self._api.list(
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            client=client,
        )

    async def update(
        self,
        resource: str,
        obj: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        client: str = "controller",
    ) -> dict[str, Any]:
        await self._send()
        return await self._api.update(
            resource, obj, namespace=namespace, subresource=subresource, client=client
        )

    async def patch(
        self,
        resource: str,
        name: str,
        patch: Any,
        *,
        patch_type: PatchType = "merge",
        namespace: str | None = None,
        subresource: str | None = None,
        client: str = "controller",
    ) -> dict[str, Any]:
        await self._send()
        return await self._api.patch(
            resource,
            name,
            patch,
            patch_type=patch_type,
            namespace=namespace,
            subresource=subresource,
            client=client,
        )

    async def delete(
        self,
        resource: str,
        name: str,
        *,
        namespace: str | None = None,
        grace_period_seconds: int | None = None,
        client: str = "controller",
    ) -> dict[str, Any]:
        await self._send()
        return await self._api.delete(
            resource, name, namespace=namespace, grace_period_seconds=grace_period_seconds, client=client
        )

    def watch(
        self,
        resource: str,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Never throttled, as client-go's `Watch`."""
        return self._api.watch(
            resource,
            namespace=namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
        )
