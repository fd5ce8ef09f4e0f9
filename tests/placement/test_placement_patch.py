"""placement.patch: the diff is a correct RFC 6902 patch (checked by applying it with `jsonpatch`)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement.patch import apply, deep_copy, diff, escape, working_copy


@pytest.mark.parametrize(
    ("before", "after", "ops"),
    [
        ({"a": 1}, {"a": 1}, []),
        (
            {},
            {"metadata": {"labels": {"x": "y"}}},
            [{"op": "add", "path": "/metadata", "value": {"labels": {"x": "y"}}}],
        ),
        (
            {"metadata": {}},
            {"metadata": {"labels": {"a/b": "1"}}},
            [{"op": "add", "path": "/metadata/labels", "value": {"a/b": "1"}}],
        ),
        (
            {"l": {"a~b/c": "1"}},
            {"l": {"a~b/c": "2"}},
            [{"op": "replace", "path": "/l/a~0b~1c", "value": "2"}],
        ),
        (
            {"g": [{"n": 1}]},
            {"g": [{"n": 1}, {"n": 2}]},
            [{"op": "replace", "path": "/g", "value": [{"n": 1}, {"n": 2}]}],
        ),
        ({"a": 1, "b": 2}, {"a": 1}, [{"op": "remove", "path": "/b"}]),
        ({"a": {"b": 1}}, {"a": [1]}, [{"op": "replace", "path": "/a", "value": [1]}]),
    ],
)
def test_diff_table(before: dict[str, Any], after: dict[str, Any], ops: list[dict[str, Any]]) -> None:
    assert diff(before, after) == ops
    assert apply(before, ops) == after


def test_escape_order_matters() -> None:
    assert escape("~1") == "~01"
    assert escape("a/b~") == "a~1b~0"


def test_deep_copy_is_independent() -> None:
    original = {"spec": {"containers": [{"name": "c"}]}}
    copied = deep_copy(original)
    copied["spec"]["containers"][0]["name"] = "changed"
    assert original["spec"]["containers"][0]["name"] == "c"


def test_a_working_copy_shares_only_the_managed_fields() -> None:
    managed = [{"manager": "jobset", "fieldsV1": {"f:spec": {}}}]
    original: dict[str, Any] = {
        "metadata": {"labels": {"a": "1"}, "managedFields": managed},
        "spec": {"completions": 4},
    }
    copied = working_copy(original)
    copied["metadata"]["labels"]["a"] = "2"
    copied["spec"]["completions"] = 1
    assert original == {
        "metadata": {"labels": {"a": "1"}, "managedFields": managed},
        "spec": {"completions": 4},
    }
    assert copied["metadata"]["managedFields"] is managed
    assert list(copied["metadata"]) == list(original["metadata"])
    assert diff(original, copied) == [
        {"op": "replace", "path": "/metadata/labels/a", "value": "2"},
        {"op": "replace", "path": "/spec/completions", "value": 1},
    ]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=4), json_values, max_size=5)


@settings(max_examples=150, deadline=None)
@given(json_objects, json_objects)
def test_applying_the_diff_yields_the_target(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert apply(before, diff(before, after)) == after
    assert diff(after, after) == []
