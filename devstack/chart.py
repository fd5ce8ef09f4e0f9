"""`python -m devstack chart lint|template`: `helm lint` and `helm template` of the project's chart without a
`helm` binary. helm-python-sdk carries Helm's own Go library, as devstack's webhook registration and the
chart tests use it, so the values schema, the templates and the linter are Helm's.

    python -m devstack chart lint                              # strict, as `helm lint --strict`
    python -m devstack chart lint --set certs.mode=cert-manager
    python -m devstack chart template -f my-values.yaml        # the manifests a release would apply
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from devstack.commands import RELEASE_NAMESPACE
from devstack.webhooks import CHART_PATH, RELEASE_NAME

KUBERNETES_VERSION = "v1.31.0"
"""The oldest Kubernetes the chart supports (README): `lint` checks its capabilities against it."""
SEVERITIES = {0: "UNKNOWN", 1: "INFO", 2: "WARNING", 3: "ERROR"}
WARNING = 2


class ChartUsageError(ValueError):
    """A values file or --set that cannot be read."""


def add_command(commands: Any) -> None:
    """`chart` with its `lint` and `template` subcommands (`commands`: an argparse subparsers object)."""
    chart = commands.add_parser("chart", help="helm lint / helm template of the chart, without helm")
    actions = chart.add_subparsers(dest="chart_command", required=True)
    for name, help_text in (
        ("lint", "lint the chart strictly (warnings fail), as `helm lint --strict`"),
        ("template", "print the manifests the chart renders, as `helm template`"),
    ):
        action = actions.add_parser(name, help=help_text, description=help_text)
        action.add_argument(
            "-f", "--values", type=Path, action="append", default=[], help="values file (repeatable)"
        )
        action.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="as helm's --set")
        action.add_argument(
            "--namespace", default=RELEASE_NAMESPACE, help="release namespace (default: %(default)s)"
        )


def merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's coalescing of values: maps merge key by key, anything else replaces."""
    result = dict(base)
    for key, value in override.items():
        current = result.get(key)
        result[key] = (
            merge(current, value) if isinstance(current, dict) and isinstance(value, Mapping) else value
        )
    return result


def read_values(files: list[Path], sets: list[str]) -> dict[str, Any]:
    import helm_python

    values: dict[str, Any] = {}
    for path in files:
        try:
            loaded = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as err:
            raise ChartUsageError(f"cannot read values file {path}: {err}") from None
        if not isinstance(loaded, dict):
            raise ChartUsageError(f"values file {path} must hold a map, not {type(loaded).__name__}")
        values = merge(values, loaded)
    for expression in sets:
        try:
            values = merge(values, helm_python.parse_set_string(expression))
        except helm_python.HelmError as err:
            raise ChartUsageError(f"--set {expression}: {err}") from None
    return values


def _problems(text: str) -> list[str]:
    """The problems one Helm message names: each schema violation (`- at '/path': why`, which Helm repeats
    under a header in its templates/ message and again in its error list) on its own, else the text."""
    lines = [line.strip() for line in text.strip().splitlines()]
    schema = [line.removeprefix("- ") for line in lines if line.startswith("- at '")]
    return schema or [" ".join(lines)]


def lint(values: dict[str, Any], namespace: str) -> list[str]:
    """Helm's findings at warning level or above, one line each and each once (empty: the chart is
    clean)."""
    import helm_python

    report = helm_python.lint(
        str(CHART_PATH), values, strict=True, namespace=namespace, kube_version=KUBERNETES_VERSION
    )
    found: dict[str, str] = {}  # problem -> its line, in Helm's order
    for message in report["messages"]:
        if message["severity"] < WARNING:
            continue
        severity = SEVERITIES.get(message["severity"], message["severity"])
        for problem in _problems(str(message.get("error", ""))):
            path = "values.yaml" if problem.startswith("at '") else message.get("path", "")
            found.setdefault(problem, f"[{severity}] {path}: {problem}")
    for error in report["errors"]:
        for problem in _problems(str(error)):
            found.setdefault(problem, f"[ERROR] {problem}")
    return list(found.values())


def template(values: dict[str, Any], namespace: str) -> str:
    import helm_python

    chart = helm_python.Chart.load(str(CHART_PATH))
    try:
        rendered = chart.render(values, name=RELEASE_NAME, namespace=namespace)
    finally:
        chart.close()
    documents = [
        f"---\n# Source: {name}\n{text.strip()}\n"
        for name, text in sorted(rendered.items())
        if name.endswith((".yaml", ".yml")) and text.strip()
    ]
    return "".join(documents)


def run(args: argparse.Namespace) -> int:
    import helm_python

    try:
        values = read_values(args.values, args.set)
        if args.chart_command == "template":
            print(template(values, args.namespace), end="")
            return 0
        findings = lint(values, args.namespace)
    except ChartUsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except helm_python.HelmError as err:
        print(f"error: {CHART_PATH.name}: {err}", file=sys.stderr)
        return 1
    for finding in findings:
        print(finding)
    counted = f"{len(findings)} finding{'' if len(findings) == 1 else 's'}"
    print(f"{CHART_PATH.name}: {counted}" if findings else f"{CHART_PATH.name}: lint clean")
    return 1 if findings else 0
