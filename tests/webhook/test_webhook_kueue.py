"""The Job webhook over HTTP: a plain Indexed Job Kueue queues is admitted with `gate` at full size, the
admission warning naming Kueue and the reason recorded on the Job."""

from __future__ import annotations

from typing import Any

from placement.constants import (
    ELASTIC_FALLBACK_ANNOTATION,
    KUEUE_QUEUE_NAME_LABEL,
    STRATEGY_ANNOTATION,
    TARGET_COMPLETIONS_ANNOTATION,
)
from placement.patch import apply
from tests.webhook.webhook_support import Running, fixture_review
from webhook.review import decode_patch


def test_a_job_kueue_queues_is_admitted_with_gate_and_a_warning_naming_kueue(running: Running) -> None:
    review = fixture_review("indexed-job.json")
    job: dict[str, Any] = review["request"]["object"]
    job["metadata"]["labels"] = {KUEUE_QUEUE_NAME_LABEL: "user-queue"}
    answer = running.post("/mutate-jobs", review)
    response = answer["response"]
    assert response["allowed"] is True
    (warning,) = response["warnings"]
    assert "queued by Kueue" in warning
    assert "using gate" in warning
    admitted = apply(job, decode_patch(answer))  # type: ignore[arg-type]
    assert (admitted["spec"]["completions"], admitted["spec"]["parallelism"]) == (3, 3)
    assert "Kueue" in admitted["metadata"]["annotations"][ELASTIC_FALLBACK_ANNOTATION]
    assert TARGET_COMPLETIONS_ANNOTATION not in admitted["metadata"]["annotations"]
    assert admitted["spec"]["template"]["metadata"]["annotations"][STRATEGY_ANNOTATION] == "gate"
