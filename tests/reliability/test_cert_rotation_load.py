"""Serving-certificate rotation under admission load: zero failed admissions, and every new connection
after a rotation gets the new certificate (the process is never restarted)."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections import Counter
from pathlib import Path

import httpx

from tests.reliability.reliability_processes import (
    WebhookUnderTest,
    dev_certs,
    file_certificate_der,
    fixture_review,
    served_certificate_der,
)
from tests.support.fake_api import FakeKubeApi
from tests.support.waiting import eventually

ROTATIONS = 3
ADMISSIONS_PER_CERTIFICATE = 20
"""Admissions (on new connections too) that must succeed under each certificate before the next rotation."""


async def _load(webhook: WebhookUnderTest, stop: threading.Event, tally: Counter[str]) -> None:
    """Half the clients keep their connection, half open a new one per admission (each new TLS handshake
    is served whatever certificate is current)."""
    review = fixture_review("leader-pod.json")
    uid = review["request"]["uid"]

    async def admit(client: httpx.AsyncClient) -> None:
        try:
            response = await client.post("/mutate-pods", json=review)
            answer = response.json()
            ok = response.status_code == 200 and answer["response"]["uid"] == uid
            tally["ok" if ok else f"bad {response.status_code}"] += 1
            tally["patched"] += "patch" in answer.get("response", {})
        except (httpx.HTTPError, ValueError) as err:
            tally[f"error {type(err).__name__}: {err}"] += 1

    async def keep_alive() -> None:
        async with httpx.AsyncClient(base_url=webhook.base, verify=webhook.trust(), timeout=10) as client:
            while not stop.is_set():
                await admit(client)

    async def new_connections() -> None:
        while not stop.is_set():
            async with httpx.AsyncClient(base_url=webhook.base, verify=webhook.trust(), timeout=10) as client:
                await admit(client)
                tally["new_connections"] += 1

    await asyncio.gather(*(keep_alive() for _ in range(3)), *(new_connections() for _ in range(3)))


def more_admissions(
    tally: Counter[str], count: int = ADMISSIONS_PER_CERTIFICATE, timeout: float = 30
) -> None:
    """Wait until `count` more admissions succeeded, `count` of them on new connections (polled)."""
    target_ok, target_new = tally["ok"] + count, tally["new_connections"] + count
    eventually(
        lambda: tally["ok"] >= target_ok and tally["new_connections"] >= target_new,
        lambda: f"{count} more admissions, {count} on new connections (stalled at {dict(tally)})",
        timeout,
        interval=0.02,
    )


def serves(webhook: WebhookUnderTest, certificate: bytes) -> bool:
    """Whether a new connection is served `certificate`."""
    return served_certificate_der(webhook.port, webhook.ca_file) == certificate


def test_rotation_under_load_fails_no_admission(tmp_path: Path) -> None:
    tally: Counter[str] = Counter()
    stop = threading.Event()
    with FakeKubeApi() as api, WebhookUnderTest(tmp_path, api) as webhook:
        loader = threading.Thread(target=lambda: asyncio.run(_load(webhook, stop, tally)))
        loader.start()
        served: list[bytes] = [served_certificate_der(webhook.port, webhook.ca_file)]
        try:
            for _ in range(ROTATIONS):
                more_admissions(tally)  # under the current certificate
                dev_certs(webhook.cert_dir, renew=True)
                new = file_certificate_der(webhook.cert_dir)
                assert new != served[-1]
                eventually(
                    functools.partial(serves, webhook, new), "new connections to get the new certificate", 20
                )
                served.append(new)
            more_admissions(tally)  # under the last certificate
        finally:
            stop.set()
            loader.join(30)
        metrics = webhook.metrics()
        assert webhook.process.running  # never restarted
    print(f"cert rotation under load: {dict(tally)}")
    failures = {k: v for k, v in tally.items() if k not in ("ok", "patched", "new_connections")}
    assert failures == {}
    assert tally["ok"] >= (ROTATIONS + 1) * ADMISSIONS_PER_CERTIFICATE
    assert tally["patched"] == tally["ok"]
    assert len(set(served)) == ROTATIONS + 1
    assert f'exclusive_placement_cert_reloads_total{{outcome="ok"}} {ROTATIONS + 1}.0' in metrics
