"""The Dockerfile, reviewed by rule since no Docker engine runs here: one non-root target per component,
no build tools in the final images, every package a component imports copied in, the product images
carrying the product only, nothing ignored that is copied."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.compose.compose_model import (
    DOCKERFILE,
    DOCKERIGNORE,
    REPO,
    Stage,
    dockerfile_stages,
    lineage,
    resolved,
)

COMPONENTS = ("webhook", "resizer", "certs")
PRODUCT = ("webhook", "resizer", "certs")
PRODUCT_PACKAGES = {"placement", "kubekit", "certs", "webhook", "resizer"}
INTERNAL_PACKAGES = ("placement", "kubekit", "certs", "webhook", "resizer", "devstack", "bench", "tests")
BUILD_TOOLS = re.compile(r"\b(gcc|g\+\+|make|build-essential|clang|cargo|rustc|python3-dev|libffi-dev)\b")


@pytest.fixture(scope="module")
def stages() -> dict[str, Stage]:
    return dockerfile_stages(DOCKERFILE.read_text())


def entrypoint(stages: dict[str, Stage], target: str) -> list[str]:
    for stage in lineage(stages, target):
        if stage.values("ENTRYPOINT"):
            result: list[str] = json.loads(stage.values("ENTRYPOINT")[-1])
            return result
    raise AssertionError(f"no ENTRYPOINT for {target}")


def effective_user(stages: dict[str, Stage], target: str) -> str:
    for stage in lineage(stages, target):
        if stage.values("USER"):
            return stage.values("USER")[-1]
    return "root"


def copied_sources(stages: dict[str, Stage], target: str) -> set[str]:
    """Build-context paths COPY'd into the target (COPY --from=... copies from another stage)."""
    sources: set[str] = set()
    for stage in lineage(stages, target):
        for value in stage.values("COPY"):
            if not value.startswith("--from"):
                sources.update(p.rstrip("/") for p in value.split()[:-1])
    return sources


def imported_packages(package: str) -> set[str]:
    """Internal packages `package` needs, following imports transitively."""
    needed, pending = {package}, [package]
    while pending:
        for source in (REPO / pending.pop()).rglob("*.py"):
            for found in re.findall(r"^\s*(?:from|import) (\w+)", source.read_text(), flags=re.MULTILINE):
                if found in INTERNAL_PACKAGES and found not in needed:
                    needed.add(found)
                    pending.append(found)
    return needed


@pytest.mark.parametrize("component", COMPONENTS)
def test_each_component_has_a_target_with_its_entrypoint(stages: dict[str, Stage], component: str) -> None:
    assert entrypoint(stages, component) == ["python", "-m", component]


@pytest.mark.parametrize("component", [*COMPONENTS, "devtools"])
def test_every_target_runs_as_a_non_root_user(stages: dict[str, Stage], component: str) -> None:
    uid = effective_user(stages, component).split(":")[0]
    assert uid.isdigit()
    assert int(uid) != 0


@pytest.mark.parametrize("component", COMPONENTS)
def test_final_images_carry_no_build_tools(stages: dict[str, Stage], component: str) -> None:
    chain = lineage(stages, component)
    assert chain[-1].base == "${PYTHON_IMAGE}"
    for stage in chain:
        for command in stage.values("RUN"):
            assert not BUILD_TOOLS.search(command), command
            assert "pip install" not in command, "the final images install nothing: the venv is copied in"
        for value in stage.values("COPY"):
            if value.startswith("--from="):
                assert value.split()[0] in ("--from=build", "--from=build-sim"), value
    assert "pip uninstall" in " ".join(chain[-1].values("RUN"))


def venv_stage(stages: dict[str, Stage], target: str) -> str:
    """The stage whose /opt/venv the target ends up with (the nearest COPY --from=... /opt/venv wins)."""
    for stage in lineage(stages, target):
        for value in reversed(stage.values("COPY")):
            if value.startswith("--from=") and value.endswith("/opt/venv /opt/venv"):
                return value.split()[0].removeprefix("--from=")
    raise AssertionError(f"{target} copies no virtualenv")


def installed_requirements(stages: dict[str, Stage], stage: str) -> set[str]:
    return {
        match
        for step in lineage(stages, stage)
        for command in step.values("RUN")
        for match in re.findall(r"-r /tmp/(\S+)", command)
    }


@pytest.mark.parametrize("component", PRODUCT)
def test_product_images_carry_the_product_only(stages: dict[str, Stage], component: str) -> None:
    assert copied_sources(stages, component) <= PRODUCT_PACKAGES
    assert installed_requirements(stages, venv_stage(stages, component)) == {"requirements.txt"}


def test_the_registration_image_gets_the_tools_requirements(stages: dict[str, Stage]) -> None:
    assert "requirements-tools.txt" in installed_requirements(stages, venv_stage(stages, "devtools"))


def test_every_package_the_registration_imports_is_in_its_image(stages: dict[str, Stage]) -> None:
    assert imported_packages("devstack") | {"kubekit"} <= copied_sources(stages, "devtools")


def test_python_base_is_slim(stages: dict[str, Stage]) -> None:
    default = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", DOCKERFILE.read_text(), flags=re.MULTILINE)
    assert default is not None
    assert re.fullmatch(r"python:3\.11-slim(-\w+)?(@sha256:[0-9a-f]{64})?", default.group(1))


def test_dependencies_are_binary_wheels_from_the_pinned_lists(stages: dict[str, Stage]) -> None:
    installs = [
        c for s in stages.values() for c in s.values("RUN") if "pip --python" in c and " install " in c
    ]
    assert installs
    for command in installs:
        assert "--only-binary=:all:" in command
        assert "-r /tmp/" in command


@pytest.mark.parametrize("component", COMPONENTS)
def test_every_package_a_component_imports_is_in_its_image(stages: dict[str, Stage], component: str) -> None:
    assert imported_packages(component) <= copied_sources(stages, component)


def test_the_build_context_keeps_everything_the_dockerfile_copies(stages: dict[str, Stage]) -> None:
    rules = [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert rules[0] == "*", "allow-list: nothing enters the context unless listed"
    allowed = {rule.removeprefix("!").rstrip("/") for rule in rules if rule.startswith("!")}
    copied = {source for stage in stages.values() for source in copied_sources(stages, stage.name)}
    assert {"requirements.txt", "webhook", "resizer", "images/register_webhooks.py"} <= copied
    assert copied <= allowed
    assert all((REPO / path).exists() for path in allowed)


@pytest.mark.parametrize("service", ["certs", "webhook", "resizer", "register-webhooks"])
def test_compose_builds_existing_targets_with_their_entrypoints(
    stages: dict[str, Stage], service: str
) -> None:
    definition = resolved()["services"][service]
    target = definition["build"]["target"]
    assert target in stages
    assert definition["entrypoint"] == entrypoint(stages, target)


def test_chart_image_repositories_are_dockerfile_targets(stages: dict[str, Stage]) -> None:
    values = (REPO / "charts" / "exclusive-placement" / "values.yaml").read_text()
    repositories = re.findall(r"^\s+repository: (\S+)$", values, flags=re.MULTILINE)
    assert sorted(repositories) == ["resizer", "webhook"]
    assert all(entrypoint(stages, r) == ["python", "-m", r] for r in repositories)


def test_devtools_image_carries_the_chart_for_registration(stages: dict[str, Stage]) -> None:
    sources = copied_sources(stages, "devtools")
    assert {"charts", "devstack", "images/register_webhooks.py"} <= sources
    assert Path(REPO / "images" / "register_webhooks.py").is_file()
