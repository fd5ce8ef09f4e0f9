"""The chart's RBAC grants every Kubernetes API call the webhook and resizer sources make.

The kube tier runs both under the chart's RBAC (tests/kube/test_kube_rbac.py), but only the calls its
scenarios happen to make; this reads every call off the sources instead. Both components reach the API
only through `kubekit.client.Kube`: the calls are its methods (each mapped to the request it makes,
below; a custom object's resource is the `CustomResource` its caller declares) and the resources their
informers list and watch, in their own sources and in the kubekit modules they import (the resizer's
election and Event recorder are kubekit's).
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

from kubekit.client import CustomResource, Kube
from resizer.informers import resizer_informers
from tests.chart.chart_rendering import NAMESPACE, Obj, grants_of, merged, of_component, render
from tests.resizer.resizer_world import World
from tests.support.fake_api import WatchFeed

REPO = Path(__file__).resolve().parents[2]
GROUPS = {
    "pods": "",
    "pods/status": "",
    "nodes": "",
    "jobs": "batch",
    "leases": "coordination.k8s.io",
    "jobsets": "jobset.x-k8s.io",
    "events": "events.k8s.io",
    "workloads": "kueue.x-k8s.io",
}
KUBE_METHODS: dict[str, tuple[str, str]] = {
    # method: (resource, verb); `list_objects` and `watch` take the resource as their first argument
    "get_job": ("jobs", "get"),
    "patch_job": ("jobs", "patch"),
    "json_patch_job": ("jobs", "patch"),
    "get_pod": ("pods", "get"),
    "patch_pod": ("pods", "patch"),
    "patch_pod_status": ("pods/status", "patch"),
    "delete_pod": ("pods", "delete"),
    "get_node": ("nodes", "get"),
    "get_lease": ("leases", "get"),
    "create_lease": ("leases", "create"),
    "replace_lease": ("leases", "update"),
    "create_event": ("events", "create"),
    "patch_event": ("events", "patch"),
}
CUSTOM_METHODS = {
    "get_custom_object": "get",
    "get_cluster_custom_object": "get",
    "list_custom_objects": "list",
}
"""method: verb; the first argument names the module's `CustomResource`."""
CUSTOM_CALL = re.compile(rf"\.({'|'.join(CUSTOM_METHODS)})\(\s*([A-Za-z_]\w*)")
LISTED = re.compile(
    r"\b(?:Informer|_informer|informer|list_objects)\(\s*(?:[\w.]+,\s*)?\"(jobs|pods|nodes)\""
)
NAMESPACED_IN_RELEASE = {"leases"}
"""Resources a component only touches in its own namespace (the Lease)."""


def call(resource: str, verb: str) -> tuple[str, str, str, str]:
    scope = NAMESPACE if resource in NAMESPACED_IN_RELEASE else "cluster"
    return (scope, GROUPS[resource], resource, verb)


KUBEKIT_MODULE = re.compile(r"\bkubekit\.(\w+)")


def sources_of(package: str) -> list[Path]:
    """The sources of `package`, and of the kubekit modules they import (transitively): the plumbing that
    makes calls for a component (its election, its Event recorder) is kubekit's. `kubekit.client` defines
    the calls and makes none of its own."""
    sources = sorted((REPO / package).rglob("*.py"))
    seen: set[str] = set()
    pending = list(sources)
    while pending:
        for name in KUBEKIT_MODULE.findall(pending.pop().read_text()):
            module = REPO / "kubekit" / f"{name}.py"
            if name in seen or name == "client" or not module.is_file():
                continue
            seen.add(name)
            sources.append(module)
            pending.append(module)
    return sources


def api_calls(package: str) -> set[tuple[str, str, str, str]]:
    """(scope, API group, plural resource, verb) for every API call the sources of `package` make."""
    calls = set()
    for source in sources_of(package):
        text = source.read_text()
        for method, (resource, verb) in KUBE_METHODS.items():
            if re.search(rf"\.{method}\b", text):  # called, or handed on as `self.kube.patch_job`
                calls.add(call(resource, verb))
        for method, name in CUSTOM_CALL.findall(text):
            module = ".".join(source.relative_to(REPO).with_suffix("").parts)
            custom = getattr(importlib.import_module(module), name)
            assert isinstance(custom, CustomResource), f"{module}.{name} is not a CustomResource"
            calls.add(("cluster", custom.group, custom.plural, CUSTOM_METHODS[method]))
        for resource in LISTED.findall(text):
            calls.update({call(resource, "list"), call(resource, "watch")})
    return calls


def test_every_kube_method_is_mapped_to_its_request() -> None:
    public = {name for name, _ in inspect.getmembers(Kube, inspect.isfunction) if not name.startswith("_")}
    assert public - {"close", "list_objects", "watch"} == set(KUBE_METHODS) | set(CUSTOM_METHODS)


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
    assert ("cluster", "batch", "jobs", "watch") in api_calls("resizer")
    assert (NAMESPACE, "coordination.k8s.io", "leases", "update") in api_calls("resizer")
    assert ("cluster", "", "nodes", "get") in api_calls("webhook")
    assert ("cluster", "", "pods", "list") in api_calls("webhook")
    assert ("cluster", "jobset.x-k8s.io", "jobsets", "get") in api_calls("webhook")
    assert ("cluster", "kueue.x-k8s.io", "localqueues", "get") in api_calls("webhook")
    assert ("cluster", "kueue.x-k8s.io", "clusterqueues", "get") in api_calls("webhook")
    assert ("cluster", "kueue.x-k8s.io", "resourceflavors", "get") in api_calls("webhook")
    assert ("cluster", "", "pods", "delete") in api_calls("resizer")
    assert ("cluster", "", "pods/status", "patch") in api_calls("resizer")
    assert ("cluster", "events.k8s.io", "events", "patch") in api_calls("resizer")


@pytest.mark.parametrize("component", ["webhook", "resizer"])
def test_nothing_is_granted_that_the_component_never_calls(objects: list[Obj], component: str) -> None:
    account = of_component(objects, "Deployment", component)["spec"]["template"]["spec"]["serviceAccountName"]
    calls = api_calls(component)
    granted = {
        (scope, group, resource, verb)
        for scope, grants in grants_of(objects, account).items()
        for (group, resource), verbs in grants.items()
        for verb in verbs
    }
    assert granted - calls == set()


# --- resizer.namespace: the writes bound in the served namespace alone ---------------------------------

SERVED = "team-a"
CLUSTER_SCOPED = {"nodes"}


def every_namespace_reads() -> set[tuple[str, str, str, str]]:
    """The list and watch calls the resizer still makes in every namespace when it serves one: those of its
    informers that list with no namespace although given one (read off `resizer.informers` itself)."""
    with World() as world:
        informers = resizer_informers(lambda _name: WatchFeed(), world.resizer, namespace=SERVED)
    return {
        call(informer.resource, verb)
        for informer in informers
        if informer.namespace is None
        for verb in ("list", "watch")
    }


def test_the_resizer_reads_pods_and_nodes_in_every_namespace_when_it_serves_one() -> None:
    assert every_namespace_reads() == {
        call("pods", "list"),
        call("pods", "watch"),
        call("nodes", "list"),
        call("nodes", "watch"),
    }


def test_serving_one_namespace_every_call_is_granted_where_it_is_made_and_writes_only_there(
    mode_values: dict[str, Obj],
) -> None:
    objects = render(merged(mode_values["generate"], {"resizer": {"namespace": SERVED}}))
    account = of_component(objects, "Deployment", "resizer")["spec"]["template"]["spec"]["serviceAccountName"]
    grants = grants_of(objects, account)
    assert set(grants) == {"cluster", SERVED, NAMESPACE}
    cluster_wide = every_namespace_reads() | {
        call for call in api_calls("resizer") if call[2] in CLUSTER_SCOPED
    }
    expected: dict[str, set[tuple[str, str, str]]] = {"cluster": set(), SERVED: set(), NAMESPACE: set()}
    for scope, group, resource, verb in api_calls("resizer"):
        where = (
            scope
            if scope != "cluster"
            else "cluster"
            if (scope, group, resource, verb) in cluster_wide
            else SERVED
        )
        expected[where].add((group, resource, verb))
    granted = {
        scope: {(group, resource, verb) for (group, resource), verbs in scoped.items() for verb in verbs}
        for scope, scoped in grants.items()
    }
    assert granted == expected
    writes = {"patch", "delete", "create", "update"}
    assert {verb for _, _, verb in granted["cluster"]} & writes == set()
    assert ("", "pods", "patch") in granted[SERVED]
