"""`pip wheel .` / `pip install .` is the product alone (placement, kubekit, webhook, resizer, certs,
kubectl_plugin) with its runtime dependencies; devstack, bench and the tests run from a checkout with
requirements-tools.txt and requirements-dev.txt. The pins in pyproject.toml and requirements*.txt agree.

The entry points run in a child interpreter in which the tools (and their requirements) cannot be imported,
as after a plain `pip install .`.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from devstack.extra import DISTRIBUTIONS

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("placement", "kubekit", "webhook", "resizer", "certs", "kubectl_plugin")
TOOLS = ("devstack", "bench", "tests", "helm_python", "matplotlib", "celpy")
"""What a checkout adds to the product: never needed by an entry point of the wheel."""
WITHOUT = """
import runpy, sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None  # as if not installed: imports fail, find_spec answers None
sys.argv = sys.argv[2:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def run_without(modules: tuple[str, ...], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT, ",".join(modules), *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("entry_point", ["webhook", "resizer", "certs", "kubectl_plugin"])
def test_the_product_runs_without_the_tools(entry_point: str) -> None:
    result = run_without(TOOLS, entry_point, "--help")
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout


@pytest.mark.parametrize(
    ("argv", "missing"),
    [(("devstack", "--help"), "helm_python"), (("bench", "--help"), "matplotlib")],
)
def test_a_tool_without_its_requirements_says_what_to_install(argv: tuple[str, ...], missing: str) -> None:
    result = run_without((missing,), *argv)
    assert result.returncode != 0
    assert (
        f"needs the tools' requirements, which are not installed (missing: {DISTRIBUTIONS[missing]})"
        in result.stderr
    )
    assert "pip install -r requirements-tools.txt" in result.stderr


def pins(path: Path) -> dict[str, str]:
    """Distribution (normalised) → version, following `-r` includes."""
    found: dict[str, str] = {}
    for line in (raw.strip() for raw in path.read_text().splitlines()):
        if line.startswith("-r "):
            found.update(pins(path.parent / line.removeprefix("-r ").strip()))
        elif "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            found[normalise(name)] = version
    return found


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(requirements: list[str]) -> dict[str, str]:
    return {normalise(r.split("==")[0]): r.split("==")[1] for r in requirements}


@pytest.fixture(scope="module")
def project() -> dict[str, object]:
    table: dict[str, object] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return table


def test_pyproject_pins_match_the_requirement_files(project: dict[str, object]) -> None:
    dependencies = project["dependencies"]
    assert isinstance(dependencies, list)
    assert declared(dependencies).items() <= pins(ROOT / "requirements.txt").items()
    assert "optional-dependencies" not in project, "the wheel carries no tool, so it offers no extra"
    # each requirement file only adds to the one it includes, at the same pins
    runtime, tools, dev = (
        pins(ROOT / f) for f in ("requirements.txt", "requirements-tools.txt", "requirements-dev.txt")
    )
    assert runtime.items() <= tools.items() <= dev.items()


def test_the_runtime_requirements_hold_none_of_the_tools(project: dict[str, object]) -> None:
    runtime = pins(ROOT / "requirements.txt")
    for name in DISTRIBUTIONS.values():
        if name != "PyYAML":  # also a dependency of the kubernetes client
            assert normalise(name) not in runtime


def third_party_imports(package: str) -> set[str]:
    found: set[str] = set()
    for source in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {name for name in found if name not in sys.stdlib_module_names and name not in PRODUCT}


def test_every_module_the_product_imports_is_a_declared_dependency(project: dict[str, object]) -> None:
    dependencies = project["dependencies"]
    assert isinstance(dependencies, list)
    direct = set(declared(dependencies))
    distributions = packages_distributions()
    for package in PRODUCT:
        for module in third_party_imports(package):
            providers = {normalise(d) for d in distributions.get(module, [])}
            assert providers & direct, (
                f"{package} imports {module}, provided by {providers}: not a dependency"
            )


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], str]:
    """The files of the wheel `pip wheel .` builds, and its entry points. Built from a copy of the whole
    checkout's tree (every package, tests included), so that what stays out is left out by pyproject.toml
    and the checkout is untouched (the build backend is the pinned setuptools of the venv)."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    packages = [p.parent.name for p in ROOT.glob("*/__init__.py")]
    assert {*PRODUCT, "devstack", "bench", "tests"} <= set(packages)
    for package in packages:
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("exclusive_placement-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        return names, archive.read(entry_points).decode()


def test_the_wheel_carries_the_product_and_nothing_else(wheel_names: tuple[list[str], str]) -> None:
    names, _ = wheel_names
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == set(PRODUCT)
    for package in PRODUCT:
        assert f"{package}/__init__.py" in names


def test_pip_install_brings_the_kubectl_plugins_console_script(wheel_names: tuple[list[str], str]) -> None:
    """The wheel `pip install .` installs: `kubectl-exclusive_placement` (kubectl finds it on PATH by that
    name) pointing at the plugin's main, and the plugin's package."""
    names, scripts = wheel_names
    assert "kubectl-exclusive_placement = kubectl_plugin.cli:main" in scripts
    assert "kubectl_plugin/cli.py" in names
