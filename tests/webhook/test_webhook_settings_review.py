"""Settings precedence and validation, the CLI's error exits, and the AdmissionReview wire helpers."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from placement.admission import Verdict
from placement.constants import DEFAULT_FOLLOWER_SHARDS
from webhook.__main__ import main
from webhook.review import (
    BadReview,
    allowed,
    decode_patch,
    denied,
    errored,
    from_verdict,
    parse_review,
    patched,
)
from webhook.settings import WebhookSettings, load_settings


def test_flags_override_environment_over_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EXCLUSIVE_PLACEMENT_PORT", "7443")
    monkeypatch.setenv("EXCLUSIVE_PLACEMENT_DEFAULT_STRATEGY", "gate")
    monkeypatch.setenv("EXCLUSIVE_PLACEMENT_CERT_DIR", str(tmp_path))
    from_env = load_settings([])
    assert (from_env.port, from_env.default_strategy, from_env.cert_dir) == (7443, "gate", tmp_path)
    assert from_env.host == "0.0.0.0"
    flagged = load_settings(["--port", "8443", "--default-strategy", "affinity", "--log-format", "json"])
    assert (flagged.port, flagged.default_strategy, flagged.log_format) == (8443, "affinity", "json")


def test_follower_shards_default_to_the_charts_and_are_a_flag(tmp_path: Path) -> None:
    assert load_settings(["--cert-dir", str(tmp_path)]).follower_shards == DEFAULT_FOLLOWER_SHARDS == 64
    assert load_settings(["--cert-dir", str(tmp_path), "--follower-shards=1"]).follower_shards == 1


def test_the_job_controllers_usernames_are_a_comma_separated_list(tmp_path: Path) -> None:
    default = load_settings(["--cert-dir", str(tmp_path)])
    assert "system:serviceaccount:kube-system:job-controller" in default.job_controller_usernames
    ours = load_settings(["--cert-dir", str(tmp_path), "--job-controller-usernames", "a, b,"])
    assert ours.job_controller_usernames == ("a", "b")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "--cert-dir is required"),
        (
            {"insecure_dev": True, "default_strategy": "fast"},
            "'elastic', 'gate', 'scheduling-gate' or 'affinity'",
        ),
        (
            {"insecure_dev": True, "server": "http://x", "kubeconfig": Path("k")},
            "either --kubeconfig or --server",
        ),
        ({"insecure_dev": True, "port": 70000}, "less than or equal to 65535"),
        (
            {"insecure_dev": True, "job_controller_usernames": ""},
            "at least one username of the Job controller",
        ),
        ({"insecure_dev": True, "follower_shards": 0}, "greater than or equal to 1"),
        ({"insecure_dev": True, "follower_shards": 65}, "less than or equal to 64"),
    ],
)
def test_invalid_settings_are_rejected(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        WebhookSettings(**options)  # type: ignore[arg-type]


@pytest.fixture
def root_logging() -> Iterator[None]:
    """main() configures the root logger; put it back for the tests that follow."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("root_logging")
def test_cli_reports_bad_configuration(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["--port", "1"]) == 2
    assert "--cert-dir is required" in capsys.readouterr().err
    assert main(["--cert-dir", str(tmp_path / "missing")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert main(["--insecure-dev", "--kubeconfig", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


def _review(**request: object) -> bytes:
    base = {
        "uid": "u1",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        "object": {},
    }
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {**base, **request}}
    ).encode()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[1]", "JSON object"),
        (b'{"kind": "Pod"}', "kind must be AdmissionReview"),
        (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1beta1"}', "apiVersion must be"),
        (_review(uid=""), "request.uid is missing"),
        (_review(kind="Pod"), "request.kind is missing"),
        (_review(operation="PATCH"), "request.operation must be one of"),
        (_review(object=[1]), "request.object must be an object"),
        (_review(userInfo={"username": 7}), "request.userInfo.username must be a string"),
        (_review(userInfo="alice"), "request.userInfo.username must be a string"),
    ],
)
def test_parse_review_rejects_unusable_bodies(body: bytes, message: str) -> None:
    with pytest.raises(BadReview, match=message):
        parse_review(body)


def test_parse_review_accepts_a_real_request() -> None:
    assert parse_review(_review())["request"]["uid"] == "u1"


def test_response_vocabulary_echoes_uid() -> None:
    assert allowed("u", ("w",)) == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "u", "allowed": True, "warnings": ["w"]},
    }
    assert denied("u", "no")["response"]["status"] == {"code": 403, "message": "no", "reason": "Forbidden"}
    assert errored("u", "boom")["response"]["status"]["code"] == 500
    ops = [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]
    review = patched("u", ops)
    assert review["response"]["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(review["response"]["patch"])) == ops == decode_patch(review)
    assert "patch" not in patched("u", [])["response"]


def test_validating_verdicts_never_patch() -> None:
    verdict = Verdict(allowed=True, reason="x", patch=[{"op": "remove", "path": "/a"}])
    with pytest.raises(ValueError, match="must not patch"):
        from_verdict("u", verdict, mutating=False)


def test_live_lookup_timeout_is_short_by_default_and_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXCLUSIVE_PLACEMENT_INSECURE_DEV", "true")
    assert load_settings([]).live_lookup_timeout_seconds == 2.0
    monkeypatch.setenv("EXCLUSIVE_PLACEMENT_LIVE_LOOKUP_TIMEOUT_SECONDS", "1.5")
    assert load_settings([]).live_lookup_timeout_seconds == 1.5
    assert load_settings(["--live-lookup-timeout-seconds", "0.5"]).live_lookup_timeout_seconds == 0.5
