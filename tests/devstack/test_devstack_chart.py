"""`python -m devstack chart lint|template` (`make helm-lint`): Helm's lint and render, no helm binary."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from devstack.__main__ import main


def test_the_chart_lints_clean(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chart", "lint"]) == 0
    assert capsys.readouterr().out == "exclusive-placement: lint clean\n"


def test_lint_names_a_value_the_schema_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chart", "lint", "--set", "placement.defaultStrategy=fastest"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines() == [  # once, though Helm reports it under three headings
        "[ERROR] values.yaml: at '/placement/defaultStrategy': value must be one of 'elastic', 'gate', "
        "'scheduling-gate', 'affinity'",
        "exclusive-placement: 1 finding",
    ]


def test_two_schema_errors_are_two_findings(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["chart", "lint", "--set", "placement.defaultStrategy=fastest", "--set", "certs.mode=sideways"]
    assert main(argv) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "exclusive-placement: 2 findings"
    assert len(lines) == 3


def test_template_renders_with_values_files_and_sets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"certs": {"mode": "cert-manager"}, "webhook": {"replicas": 5}}))
    assert (
        main(["chart", "template", "-f", str(values), "--set", "webhook.replicas=3", "--namespace", "ops"])
        == 0
    )
    documents = [doc for doc in yaml.safe_load_all(capsys.readouterr().out) if doc]
    kinds = {doc["kind"] for doc in documents}
    assert {"ValidatingWebhookConfiguration", "Certificate", "Deployment"} <= kinds
    (webhook,) = [
        d for d in documents if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-webhook")
    ]
    assert webhook["spec"]["replicas"] == 3
    assert webhook["metadata"]["namespace"] == "ops"
    validating = next(d for d in documents if d["kind"] == "ValidatingWebhookConfiguration")
    assert "jobsets.validate.exclusive-placement.io" in [w["name"] for w in validating["webhooks"]]


@pytest.mark.parametrize("content", ["- a list\n", "a: [unclosed\n"])
def test_a_values_file_that_cannot_be_read_is_one_line(
    content: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(content)
    assert main(["chart", "lint", "-f", str(values)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert str(values) in err
