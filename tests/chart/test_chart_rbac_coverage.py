"""The chart's RBAC grants every Kubernetes API call the webhook and resizer sources make.

kubesim stores RBAC objects but authorizes nothing, so an end-to-end run cannot catch a
missing grant; this reads the calls off the `kubernetes` client methods the components use instead.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from chart_rendering import NAMESPACE, Obj, grants_of, of_component, render

REPO = Path(__file__).resolve().parents[2]
CLIENT_CALL = re.compile(
    r"\.(list|read|patch|create|replace|delete)_(namespaced_)?([a-z]+?)(_for_all_namespaces)?\b"
)
VERBS = {
    "list": {"list", "watch"},
    "read": {"get"},
    "patch": {"patch"},
    "create": {"create"},
    "replace": {"update"},
    "delete": {"delete"},
}
RESOURCES = {"pod": "", "node": "", "event": "", "job": "batch", "lease": "coordination.k8s.io"}
NAMESPACED_IN_RELEASE = {"lease"}
"""Resources a component only touches in its own namespace (the Lease)."""


def api_calls(package: str) -> set[tuple[str, str, str, str]]:
    """(scope, API group, plural resource, verb) for every kubernetes client method called in `package`."""
    calls = set()
    for source in (REPO / package).rglob("*.py"):
        for action, _, kind, _ in CLIENT_CALL.findall(source.read_text()):
            if kind not in RESOURCES:
                continue
            scope = NAMESPACE if kind in NAMESPACED_IN_RELEASE else "cluster"
            for verb in VERBS[action]:
                calls.add((scope, RESOURCES[kind], f"{kind}s", verb))
    return calls


@pytest.fixture(scope="module")
def objects(mode_values: dict[str, Obj]) -> list[Obj]:
    return render(mode_values["generate"])


@pytest.mark.parametrize("component", ["webhook", "resizer"])
def test_every_api_call_of_the_component_is_granted(objects: list[Obj], component: str) -> None:
    account = of_component(objects, "Deployment", component)["spec"]["template"]["spec"]["serviceAccountName"]
    grants = grants_of(objects, account)
    calls = api_calls(component)
    assert calls, f"found no kubernetes client calls in {component}/"
    missing = sorted(
        call for call in calls if call[3] not in grants.get(call[0], {}).get((call[1], call[2]), set())
    )
    assert missing == []


def test_the_call_scanner_sees_what_it_should() -> None:
    assert ("cluster", "batch", "jobs", "patch") in api_calls("resizer")
    assert ("cluster", "", "nodes", "get") in api_calls("webhook")
