"""Which strategy applies to a Job or pod, and whether a Job may use `elastic`.

- `select_strategy(annotations, default)`: the per-object `exclusive-placement.io/strategy` annotation,
  else the configured default; an unknown value raises `InvalidStrategy` naming the valid values.
- `strategy_of_job(job, default)`: Job metadata first, then the pod template.
- `is_indexed(job)` / `completion_mode(job)`: only an Indexed Job has a leader; a NonIndexed Job asking for
  exclusive placement is placed with `affinity` (every pod carries the leader's terms).
- `elastic_ineligibility(job)`: None when the Job can be shrunk and resized, else the reason (used in the
  admission warning when falling back to `gate`). A Job whose `spec.managedBy` names another controller
  than kube-controller-manager's Job controller is not: that controller, not the one the resize drives,
  runs it, and may copy its spec elsewhere (Kueue's MultiKueue creates the worker cluster's Job from the
  manager's spec), where a shrunk copy would run one pod.
- `max_failed_indexes_at_size_one(job)`: the `spec.maxFailedIndexes` a Job needs while it is at size 1
  (validation wants it <= completions), or None when its value fits; the resize restores the original.

What the API server checks on a Job at size 1 and on the resize (kubernetes `pkg/apis/batch/validation`,
`validateJobSpec` and `ValidateJobSpecUpdate`): `maxFailedIndexes` <= completions, and it may change on
update, so it is lowered and restored; a `successPolicy` rule's `succeededIndexes` < completions and
`succeededCount` <= completions, and `successPolicy` is immutable, so a policy that does not fit size 1
makes the Job ineligible (docs/design.md, "Shrinking safely").
"""

from __future__ import annotations

import re

from placement.constants import MAX_HOSTNAME_LENGTH, STRATEGIES, STRATEGY_ANNOTATION, Strategy
from placement.objects import Obj, annotation, metadata, pod_template, section

GENERATED_NAME_SUFFIX_LENGTH = 5
"""The API server appends 5 random characters to generateName."""
SIZE_ONE_MAX_FAILED_INDEXES = 1
INDEXED = "Indexed"
JOB_CONTROLLER_MANAGER = "kubernetes.io/job-controller"
"""`spec.managedBy` of a Job kube-controller-manager's Job controller runs (the API server's meaning of
none)."""
NON_INDEXED = "NonIndexed"
_NONZERO_DIGIT = re.compile(r"[1-9]")
"""Any number in a succeededIndexes list with a nonzero digit is an index >= 1 (read without `int()`,
which refuses over 4,300 digits)."""


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
    """The Job's own annotation first, then its pod template's (read without copying either map)."""
    value = (annotation(job, STRATEGY_ANNOTATION) or "").strip()
    if not value:
        value = (annotation(pod_template(job), STRATEGY_ANNOTATION) or "").strip()
    return validate_strategy(value) if value else Strategy(default)


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


def completion_mode(job: Obj) -> str:
    """`spec.completionMode`, with the API server's default (NonIndexed)."""
    return str(section(job, "spec").get("completionMode") or NON_INDEXED)


def is_indexed(job: Obj) -> bool:
    """Only an Indexed Job has a leader (completion index 0) to place its other pods after."""
    return completion_mode(job) == INDEXED


def elastic_ineligibility(job: Obj) -> str | None:
    spec = section(job, "spec")
    managed_by = spec.get("managedBy")
    if managed_by not in (None, JOB_CONTROLLER_MANAGER):
        return (
            f"spec.managedBy is {managed_by!r}: that controller, not kube-controller-manager's Job "
            "controller, runs the Job and may copy it elsewhere at the size it was admitted with"
        )
    if not is_indexed(job):
        return f"completionMode is {completion_mode(job)}, elastic resize needs {INDEXED}"
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
    return success_policy_problem(spec)


def success_policy_problem(spec: Obj) -> str | None:
    """Why `spec.successPolicy` is invalid at size 1 (it cannot be adapted: the field is immutable)."""
    rules = section(spec, "successPolicy").get("rules")
    if not isinstance(rules, list):
        return None
    for position, rule in enumerate(rules):
        if not isinstance(rule, dict):
            continue
        where = f"spec.successPolicy.rules[{position}]"
        indexes = rule.get("succeededIndexes")
        if isinstance(indexes, str) and _NONZERO_DIGIT.search(indexes):
            return (
                f"{where}.succeededIndexes {indexes!r} names indexes >= 1, which the API server rejects at "
                "size 1, and successPolicy cannot be changed afterwards"
            )
        count = _int_or_none(rule.get("succeededCount"))
        if count is not None and count > 1:
            return (
                f"{where}.succeededCount is {count}, which the API server rejects at size 1, and "
                "successPolicy cannot be changed afterwards"
            )
    return None


def max_failed_indexes_at_size_one(job: Obj) -> int | None:
    """`spec.maxFailedIndexes` to use at size 1 (the largest valid value), None when the current one fits."""
    current = _int_or_none(section(job, "spec").get("maxFailedIndexes"))
    if current is None or current <= SIZE_ONE_MAX_FAILED_INDEXES:
        return None
    return SIZE_ONE_MAX_FAILED_INDEXES
