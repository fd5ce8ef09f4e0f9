"""Hypothesis strategies for AdmissionReview bodies: valid reviews from the fixtures, then mutated.

Mutations model what a buggy or hostile client can send: a field replaced by any JSON value (wrong types),
a field removed, huge or unicode label keys and values, deep nesting, another kind or operation, dryRun.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from placement.constants import (
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    STRATEGIES,
    STRATEGY_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)

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


def _deep(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"n": [value]}
    return value


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
            st.sampled_from(("replace", "delete", "huge", "deep", "label", "kind", "op", "dry", "strategy"))
        )
        if action == "replace":
            parent[path[-1]] = draw(json_values)
        elif action == "delete":
            del parent[path[-1]]
        elif action == "huge":
            parent[path[-1]] = draw(huge_text)
        elif action == "deep":
            parent[path[-1]] = _deep(draw(st.integers(min_value=10, max_value=400)))
        elif action == "label":
            meta = _object_metadata(review)
            if meta is not None:
                target = meta.setdefault(draw(st.sampled_from(["labels", "annotations"])), {})
                if isinstance(target, dict):
                    target[draw(label_keys)] = draw(st.one_of(st.text(max_size=100), huge_text))
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
