"""Label and field selectors: parsing and matching, table-driven."""

from __future__ import annotations

import pytest

from kubesim.apiserver.selectors import parse_field_selector, parse_label_selector, selector_from_dict
from kubesim.errors import ApiError

LABELS = {"app": "web", "tier": "front", "exclusive-placement.io/role": "leader"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app!=web", False),
        ("app!=db", True),
        ("missing!=x", True),
        ("app in (web, db)", True),
        ("app in (db)", False),
        ("app notin (db,cache)", True),
        ("app notin (web)", False),
        ("missing notin (web)", True),
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("app=web,tier=front", True),
        ("app=web,tier=back", False),
        ("exclusive-placement.io/role=leader", True),
        ("app in (web),!missing,tier", True),
    ],
)
def test_label_selector_matches(selector: str, expected: bool) -> None:
    assert parse_label_selector(selector).matches(LABELS) is expected


@pytest.mark.parametrize("selector", ["app=(", "a b", "!app in (x)", "=x"])
def test_bad_label_selector_is_a_400(selector: str) -> None:
    with pytest.raises(ApiError) as info:
        parse_label_selector(selector)
    assert info.value.status == 400


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        (None, False),
        ({}, True),
        ({"matchLabels": {"app": "web"}}, True),
        ({"matchLabels": {"app": "db"}}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}, False),
        ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, False),
    ],
)
def test_label_selector_from_dict(selector: dict[str, object] | None, expected: bool) -> None:
    assert selector_from_dict(selector).matches(LABELS) is expected


POD = {
    "metadata": {"name": "p", "namespace": "ns"},
    "spec": {"nodeName": "n1"},
    "status": {"phase": "Running"},
}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("metadata.name=p", True),
        ("metadata.name!=p", False),
        ("metadata.namespace=ns", True),
        ("spec.nodeName=n1", True),
        ("spec.nodeName=", False),
        ("spec.nodeName!=", True),
        ("status.phase=Running,spec.nodeName=n1", True),
        ("status.phase==Pending", False),
    ],
)
def test_field_selector_matches(selector: str, expected: bool) -> None:
    assert parse_field_selector(selector).matches(POD) is expected


def test_unsupported_field_is_a_400() -> None:
    with pytest.raises(ApiError) as info:
        parse_field_selector("spec.hostname=x")
    assert info.value.status == 400
    assert "field label not supported" in info.value.message
