"""Which strategy applies to a Job or pod, and whether a Job may use `elastic`.

- `select_strategy(annotations, default)`: the per-object `exclusive-placement.io/strategy` annotation,
  else the configured default; an unknown value raises `InvalidStrategy` naming the valid values.
- `strategy_of_job(job, default)`: Job metadata first, then the pod template.
- `elastic_ineligibility(job)`: None when the Job can be shrunk and resized, else the reason (used in the
  admission warning when falling back to `gate`).
"""

from __future__ import annotations

from placement.constants import MAX_HOSTNAME_LENGTH, STRATEGIES, STRATEGY_ANNOTATION, Strategy
from placement.objects import Obj, annotations_of, metadata, pod_template, section

GENERATED_NAME_SUFFIX_LENGTH = 5
"""The API server appends 5 random characters to generateName."""


class InvalidStrategy(ValueError):
    """An unknown strategy value; the message names the valid ones."""


def validate_strategy(value: str) -> Strategy:
    try:
        return Strategy(value)
    except ValueError:
        raise InvalidStrategy(
            f"unknown exclusive placement strategy {value!r} in {STRATEGY_ANNOTATION}; "
            f"valid values: {', '.join(STRATEGIES)}"
        ) from None


def select_strategy(annos: dict[str, str], default: Strategy) -> Strategy:
    value = annos.get(STRATEGY_ANNOTATION, "").strip()
    return validate_strategy(value) if value else Strategy(default)


def strategy_of_job(job: Obj, default: Strategy) -> Strategy:
    job_annos = annotations_of(job)
    if job_annos.get(STRATEGY_ANNOTATION, "").strip():
        return select_strategy(job_annos, default)
    return select_strategy(annotations_of(pod_template(job)), default)


def _int_or_none(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def longest_hostname(job: Obj, completions: int) -> str:
    """`<job>-<completions-1>`; for generateName Jobs the name is the prefix plus 5 generated chars."""
    meta = metadata(job)
    name = str(meta.get("name") or "")
    if not name:
        name = str(meta.get("generateName") or "") + "x" * GENERATED_NAME_SUFFIX_LENGTH
    return f"{name}-{completions - 1}"


def elastic_ineligibility(job: Obj) -> str | None:
    spec = section(job, "spec")
    mode = spec.get("completionMode") or "NonIndexed"
    if mode != "Indexed":
        return f"completionMode is {mode}, elastic resize needs Indexed"
    completions = _int_or_none(spec.get("completions"))
    parallelism = _int_or_none(spec.get("parallelism"))
    if parallelism is None:
        parallelism = 1  # the API server's default
    if completions is None:
        return "spec.completions is not set, elastic resize needs completions == parallelism"
    if completions != parallelism:
        return f"completions ({completions}) != parallelism ({parallelism}), elastic resize needs them equal"
    if completions <= 1:
        return f"completions is {completions}, there is nothing to shrink"
    hostname = longest_hostname(job, completions)
    if len(hostname) > MAX_HOSTNAME_LENGTH:
        return (
            f"pod hostname {hostname!r} at the target size is {len(hostname)} characters, "
            f"over the {MAX_HOSTNAME_LENGTH}-character limit"
        )
    return None
