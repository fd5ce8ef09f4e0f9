"""At the default log level the webhook logs context (uid, namespace, Job, verdict), never object bodies
or secrets: a marker planted in env values, labels and annotations of every admitted object, and in broken
bodies, must not appear in the captured log of a real process; neither may key material."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.security.security_support import SECRET_MARKER, fixture_review, start_webhook, with_secrets
from tests.support.fake_api import FakeKubeApi

OBJECT_FIXTURES = (
    "leader-pod.json",
    "follower-pod.json",
    "non-exclusive-pod.json",
    "indexed-job.json",
    "jobset-child-job.json",
    "nonindexed-job.json",
)
ENDPOINTS = ("/mutate-pods", "/validate-pods", "/mutate-jobs")
# Strings that only appear when an object (or a part of its spec) is dumped into a log line.
BODY_FRAGMENTS = ('"containers"', "'containers'", '"spec"', "'spec'", "API_TOKEN", "leak-check")


def _broken_bodies() -> list[bytes]:
    review = with_secrets(fixture_review("leader-pod.json"))
    wrong_kind = {**review, "kind": SECRET_MARKER}
    no_uid = json.loads(json.dumps(review))
    del no_uid["request"]["uid"]
    return [
        json.dumps(wrong_kind).encode(),
        json.dumps(no_uid).encode(),
        f'{{"kind": "AdmissionReview", "apiVersion": "{SECRET_MARKER}"'.encode(),
        SECRET_MARKER.encode(),
    ]


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_default_level_logs_hold_no_bodies_or_secrets(tmp_path: Path, log_format: str) -> None:
    with FakeKubeApi() as api:
        webhook = start_webhook(tmp_path, api, "--log-format", log_format)
        try:
            with webhook.client() as client:
                answered = 0
                for name in OBJECT_FIXTURES:
                    for endpoint in ENDPOINTS:
                        review = with_secrets(fixture_review(name))
                        response = client.post(endpoint, json=review)
                        assert response.status_code == 200
                        answered += 1
                for body in _broken_bodies():
                    response = client.post(
                        "/mutate-pods", content=body, headers={"Content-Type": "application/json"}
                    )
                    assert response.status_code == 400
        finally:
            webhook.process.stop()
    log = webhook.log_text()
    assert answered == len(OBJECT_FIXTURES) * len(ENDPOINTS)
    # The log is not empty: admissions are logged, with context.
    assert "patched with" in log
    assert "denied:" in log
    assert "trainer-workers-0" in log
    assert SECRET_MARKER not in log
    assert "PRIVATE KEY" not in log
    leaked = [fragment for fragment in BODY_FRAGMENTS if fragment in log]
    assert leaked == [], f"object body fragments in the log: {leaked}"
    if log_format == "json":
        lines = [line for line in log.splitlines() if line.startswith("{")]
        assert lines
        assert all("uid" in json.loads(line) for line in lines if "patched with" in line)
