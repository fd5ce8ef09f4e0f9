"""Hypothesis strategies for AdmissionReview bodies: valid reviews from the fixtures, then mutated.

Mutations model what a buggy or hostile client can send: a field replaced by any JSON value (wrong types),
a field removed, huge or unicode label keys and values, deep nesting (up to 900 levels, near Python's
recursion limit, which the JSON decoder still accepts), another kind or operation, dryRun; and the keys
this project reads as numbers or trusts least: target and gang sizes that are not ASCII decimals or have
thousands of digits, `succeededIndexes` of thousands of digits, resize keys on any Job, and a JobSet
job-key label of another Job.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    GANG_SIZE_ANNOTATION,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_JOB_KEY_LABEL,
    RESIZE_LABEL,
    STRATEGIES,
    STRATEGY_ANNOTATION,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_MAX_FAILED_INDEXES_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)
from placement.objects import job_key

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "admission"
REVIEW_FIXTURES = (
    "leader-pod.json",
    "follower-pod.json",
    "non-exclusive-pod.json",
    "indexed-job.json",
    "jobset-child-job.json",
    "nonindexed-job.json",
)
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
KINDS = ("Pod", "Job", "JobSet", "Node", "Deployment", "", "pod")

Obj = dict[str, Any]


def load_fixture(name: str) -> Obj:
    data: Obj = json.loads((FIXTURES / name).read_text())
    return data


BASE_REVIEWS: tuple[Obj, ...] = tuple(load_fixture(name) for name in REVIEW_FIXTURES)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
label_keys = st.one_of(
    st.text(min_size=1, max_size=80),
    st.sampled_from(
        [
            "cloud.google.com/gke-nodepool",
            "a/b/c",
            "~0~1/",
            "key/with~tilde",
            "x" * 300,
            "\u00e9\u4e2d\U0001f600/\u200b",
        ]
    ),
)
huge_text = st.integers(min_value=1_000, max_value=200_000).map(lambda n: "v" * n)
odd_counts = st.one_of(
    st.sampled_from(["\u00b2", "\u0663", "\uff13", " 8", "08", "-1", "0", "1e3", "100001", ""]),
    st.integers(min_value=4_000, max_value=6_000).map(lambda n: "9" * n),
    st.integers(min_value=1, max_value=100_000).map(str),
)
huge_index_lists = st.tuples(st.sampled_from("019"), st.integers(min_value=4_000, max_value=6_000)).map(
    lambda digit_count: digit_count[0] * digit_count[1]
)
COUNT_KEYS = (
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
    TARGET_MAX_FAILED_INDEXES_ANNOTATION,
    GANG_SIZE_ANNOTATION,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (dict keys / list indexes) into a JSON value, the root excluded."""
    out: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for key, child in value.items():
            out.append((*prefix, key))
            out.extend(_paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out.append((*prefix, index))
            out.extend(_paths(child, (*prefix, index)))
    return out


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for step in path[:-1]:
        doc = doc[step]
    return doc


def _deep_list(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _forge(draw: st.DrawFn, review: Obj, action: str) -> None:
    """Odd counts in the resize and gang keys (with the resize label), a `succeededIndexes` of thousands of
    digits, or a JobSet job-key label of this or another Job, on the object and its pod template."""
    meta = _object_metadata(review)
    if meta is None:
        return
    if action == "counts":
        notes = meta.setdefault("annotations", {})
        labels = meta.setdefault("labels", {})
        if isinstance(notes, dict) and isinstance(labels, dict):
            notes[draw(st.sampled_from(COUNT_KEYS))] = draw(odd_counts)
            notes[ALL_OR_NOTHING_ANNOTATION] = "true"
            labels[RESIZE_LABEL] = draw(st.sampled_from(["pending", "done", "\u00b2"]))
    elif action == "indexes":
        spec = review["request"]["object"].get("spec")
        if isinstance(spec, dict):
            spec["successPolicy"] = {"rules": [{"succeededIndexes": draw(huge_index_lists)}]}
    else:
        name = str(meta.get("name") or "")
        key = draw(st.sampled_from([job_key("team-a", name), job_key("team-b", "victim"), "", "x" * 63]))
        for target in (meta, _template_metadata(review)):
            labels = target.setdefault("labels", {}) if target is not None else None
            if isinstance(labels, dict):
                labels[JOBSET_JOB_KEY_LABEL] = key


def _template_metadata(review: Obj) -> Obj | None:
    obj = review["request"].get("object")
    spec = obj.get("spec") if isinstance(obj, dict) else None
    template = spec.get("template") if isinstance(spec, dict) else None
    meta = template.get("metadata") if isinstance(template, dict) else None
    return meta if isinstance(meta, dict) else None


def _object_metadata(review: Any) -> Obj | None:
    request = review.get("request") if isinstance(review, dict) else None
    obj = request.get("object") if isinstance(request, dict) else None
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return meta if isinstance(meta, dict) else None


@st.composite
def mutated_reviews(draw: st.DrawFn) -> Obj:
    """A fixture review with 1-4 mutations applied anywhere in it."""
    review = copy.deepcopy(draw(st.sampled_from(BASE_REVIEWS)))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        paths = _paths(review)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = _parent(review, path)
        action = draw(
            st.sampled_from(
                (
                    "replace",
                    "delete",
                    "huge",
                    "deep",
                    "label",
                    "kind",
                    "op",
                    "dry",
                    "strategy",
                    "counts",
                    "indexes",
                    "job-key",
                )
            )
        )
        if action == "replace":
            parent[path[-1]] = draw(json_values)
        elif action == "delete":
            del parent[path[-1]]
        elif action == "huge":
            parent[path[-1]] = draw(huge_text)
        elif action == "deep":
            # Up to near Python's recursion limit (1,000), where its decoder stops; the test's own copies
            # of the review recurse too, so a very deep value is the last mutation (tests/reliability/
            # test_webhook_fuzz.py sends 957 and 990 levels as bytes).
            depth = draw(st.one_of(st.integers(10, 400), st.integers(850, 900)))
            parent[path[-1]] = _deep_list(depth)
            if depth > 400:
                break
        elif action == "label":
            meta = _object_metadata(review)
            if meta is not None:
                target = meta.setdefault(draw(st.sampled_from(["labels", "annotations"])), {})
                if isinstance(target, dict):
                    target[draw(label_keys)] = draw(st.one_of(st.text(max_size=100), huge_text))
        elif action in ("counts", "indexes", "job-key"):
            _forge(draw, review, action)
        elif action in ("kind", "op", "dry", "strategy"):
            request = review.get("request") if isinstance(review, dict) else None
            if not isinstance(request, dict):
                continue
            if action == "kind" and isinstance(request.get("kind"), dict):
                request["kind"]["kind"] = draw(st.sampled_from(KINDS))
            elif action == "op":
                request["operation"] = draw(st.sampled_from(OPERATIONS))
                if request["operation"] != "CREATE" and draw(st.booleans()):
                    request["oldObject"] = copy.deepcopy(request.get("object"))
            elif action == "dry":
                request["dryRun"] = draw(st.one_of(st.booleans(), json_values))
            else:
                meta = _object_metadata(review)
                if meta is not None:
                    notes = meta.setdefault("annotations", {})
                    if isinstance(notes, dict):
                        key = draw(
                            st.sampled_from(
                                [
                                    STRATEGY_ANNOTATION,
                                    TOPOLOGY_ANNOTATION,
                                    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
                                ]
                            )
                        )
                        notes[key] = draw(st.one_of(st.sampled_from(STRATEGIES), label_keys, json_values))
    return review


raw_bodies = st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
)
