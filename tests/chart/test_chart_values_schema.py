"""values.schema.json rejects wrong values naming the key; values.yaml, schema and README agree."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import helm_python
import pytest
import yaml

from tests.chart.chart_rendering import CHART_DIR, Obj, render

BAD_VALUES = [
    (
        {"placement": {"defaultStrategy": "fastest"}},
        "/placement/defaultStrategy",
        "must be one of 'elastic', 'gate', 'scheduling-gate', 'affinity'",
    ),
    ({"webhook": {"replicas": -1}}, "/webhook/replicas", "minimum: got -1, want 1"),
    ({"resizer": {"replicas": -2}}, "/resizer/replicas", "minimum: got -2, want 1"),
    ({"webhook": {"replicas": "two"}}, "/webhook/replicas", "got string, want integer"),
    ({"resizer": {"concurrency": 0}}, "/resizer/concurrency", "minimum: got 0, want 1"),
    ({"resizer": {"namespace": "Team_A"}}, "/resizer/namespace", "does not match pattern"),
    ({"resizer": {"namespace": ["team-a"]}}, "/resizer/namespace", "got array, want string"),
    ({"resizer": {"namespace": "a" * 64}}, "/resizer/namespace", "maxLength: got 64, want 63"),
    ({"webhook": {"replica": 3}}, "/webhook", "additional properties 'replica' not allowed"),
    (
        {"webhook": {"admission": {"mutatePods": {"failurePolicy": "Retry"}}}},
        "/webhook/admission/mutatePods/failurePolicy",
        "must be one of 'Fail', 'Ignore'",
    ),
    (
        {"webhook": {"admission": {"mutateJobs": {"timeoutSeconds": 31}}}},
        "/webhook/admission/mutateJobs/timeoutSeconds",
        "maximum: got 31, want 30",
    ),
    (
        {"certs": {"mode": "letsencrypt"}},
        "/certs/mode",
        "must be one of 'generate', 'cert-manager', 'provided'",
    ),
    ({"certs": {"mode": "provided"}}, "/certs/provided/caBundle", "minLength: got 0, want 1"),
    ({"logFormat": "xml"}, "/logFormat", "must be one of 'json', 'text'"),
    ({"webhook": {"antiAffinity": "always"}}, "/webhook/antiAffinity", "must be one of 'soft', 'hard'"),
    (
        {"webhook": {"jobKeyPolicy": {"validationActions": ["Block"]}}},
        "/webhook/jobKeyPolicy/validationActions/0",
        "must be one of 'Deny', 'Warn', 'Audit'",
    ),
    (
        {"webhook": {"jobKeyPolicy": {"validationActions": ["Deny", "Warn"]}}},
        "/webhook/jobKeyPolicy/validationActions/1",
        "must be one of 'Deny', 'Audit'",
    ),
    (
        {"webhook": {"jobKeyPolicy": {"validationActions": []}}},
        "/webhook/jobKeyPolicy/validationActions",
        "minItems: got 0, want 1",
    ),
    (
        {"webhook": {"jobKeyPolicy": {"enabled": "yes"}}},
        "/webhook/jobKeyPolicy/enabled",
        "got string, want boolean",
    ),
    (
        {"webhook": {"networkPolicy": {"enabled": True}}},
        "/webhook/networkPolicy/apiServerCIDRs",
        "minItems",
    ),
    (
        {"webhook": {"rollingUpdate": {"maxSurge": 0}}},
        "/webhook/rollingUpdate/maxSurge",
        "minimum: got 0, want 1",
    ),
    (
        {"webhook": {"rollingUpdate": {"maxUnavailable": 1}}},
        "/webhook/rollingUpdate",
        "additional properties 'maxUnavailable' not allowed",
    ),
    (
        {"webhook": {"admission": {"pods": {"followerShards": 0}}}},
        "/webhook/admission/pods/followerShards",
        "minimum: got 0, want 1",
    ),
    (
        {"webhook": {"admission": {"pods": {"followerShards": 65}}}},
        "/webhook/admission/pods/followerShards",
        "maximum: got 65, want 64",
    ),
    (
        {"webhook": {"admission": {"pods": {"followerShards": 2.5}}}},
        "/webhook/admission/pods/followerShards",
        "want integer",
    ),
    ({"webhook": {"preStopSleepSeconds": -1}}, "/webhook/preStopSleepSeconds", "minimum: got -1, want 0"),
    (
        {"webhook": {"preStopSleepSeconds": "5s"}},
        "/webhook/preStopSleepSeconds",
        "got string, want integer",
    ),
    (
        {"webhook": {"terminationGracePeriodSeconds": 0}},
        "/webhook/terminationGracePeriodSeconds",
        "minimum: got 0, want 1",
    ),
    (
        {"webhook": {"networkPolicy": {"apiServerCIDRs": ["10.0.0.1"]}}},
        "/webhook/networkPolicy/apiServerCIDRs/0",
        "does not match pattern",
    ),
]


@pytest.mark.parametrize(("values", "where", "why"), BAD_VALUES, ids=[b[1] for b in BAD_VALUES])
def test_wrong_values_are_rejected_readably(values: Obj, where: str, why: str) -> None:
    chart = helm_python.Chart.load(str(CHART_DIR))
    try:
        with pytest.raises(helm_python.HelmValuesError) as raised:
            chart.validate_schema(values)
    finally:
        chart.close()
    message = str(raised.value)
    assert f"at '{where}'" in message
    assert why in message


def test_install_refuses_wrong_values_before_rendering() -> None:
    with pytest.raises(helm_python.HelmValuesError, match="defaultStrategy"):
        render({"placement": {"defaultStrategy": "fastest"}})


def test_every_strategy_is_accepted() -> None:
    from placement.constants import STRATEGIES

    for strategy in STRATEGIES:
        assert render({"placement": {"defaultStrategy": strategy}})


# --- values.yaml, values.schema.json and README.md describe the same keys ----------------------------------

FREE_FORM = {
    "resources",
    "nodeSelector",
    "tolerations",
    "extraEnv",
    "pullSecrets",
    "issuerRef",
    "objectSelector",
    "labels",
    "namespaceSelectorExpressions",
    "exemptNamespaces",
}


def value_paths(values: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """Dotted paths of every documented key: leaves, plus free-form maps/lists as a whole."""
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and key not in FREE_FORM:
            yield from value_paths(value, f"{path}.")
        else:
            yield path


def schema_paths(schema: dict[str, Any], prefix: str = "") -> Iterator[str]:
    for key, sub in schema.get("properties", {}).items():
        path = f"{prefix}{key}"
        if sub.get("type") == "object" and "properties" in sub and key not in FREE_FORM:
            yield from schema_paths(sub, f"{path}.")
        else:
            yield path


def defaults() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    return loaded


def test_schema_describes_exactly_the_keys_of_values_yaml() -> None:
    schema = json.loads((CHART_DIR / "values.schema.json").read_text())
    assert set(value_paths(defaults())) == set(schema_paths(schema)) - {"global"}


def test_every_key_in_values_yaml_has_a_comment() -> None:
    """Each key has a comment on the line above (or inline); the insides of free-form maps are examples."""
    lines = (CHART_DIR / "values.yaml").read_text().splitlines()
    ancestors: list[tuple[int, str]] = []
    undocumented = []
    for number, line in enumerate(lines):
        found = re.match(r"^(\s*)([A-Za-z][\w-]*):", line)
        if not found:
            continue
        indent, key = len(found.group(1)), found.group(2)
        ancestors = [(i, k) for i, k in ancestors if i < indent]
        inside_free_form = any(k in FREE_FORM for _, k in ancestors)
        ancestors.append((indent, key))
        if inside_free_form or "#" in line:
            continue
        if not lines[number - 1].strip().startswith("#"):
            undocumented.append(".".join(k for _, k in ancestors))
    assert undocumented == []


def test_readme_values_table_lists_every_key() -> None:
    readme = (CHART_DIR / "README.md").read_text().split("\n## Values\n", 1)[1]
    documented = set(re.findall(r"^\| `([\w.]+)` \|", readme, flags=re.MULTILINE))
    assert documented == set(value_paths(defaults()))
