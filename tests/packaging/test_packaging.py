"""`pip install .` is the product with its runtime dependencies only; `pip install '.[sim]'` adds what
kubesim, devstack and bench need. The pins in pyproject.toml and requirements*.txt agree.

The entry points run in a child interpreter in which the `sim` extra (and the simulator's own packages)
cannot be imported, as after a plain `pip install .`.
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

from kubesim.extra import DISTRIBUTIONS

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("placement", "kubekit", "webhook", "resizer", "certs", "kubectl_plugin")
SIM_ONLY = ("kubesim", "devstack", "bench", "celpy", "lark", "helm_python", "matplotlib")
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
def test_the_product_runs_without_the_sim_extra(entry_point: str) -> None:
    result = run_without(SIM_ONLY, entry_point, "--help")
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout


@pytest.mark.parametrize(
    ("argv", "missing"),
    [(("kubesim", "serve", "--help"), "celpy"), (("devstack", "--help"), "helm_python")],
)
def test_the_simulator_without_its_extra_says_what_to_install(argv: tuple[str, ...], missing: str) -> None:
    result = run_without((missing,), *argv)
    assert result.returncode != 0
    assert (
        f"needs the `sim` extra, which is not installed (missing: {DISTRIBUTIONS[missing]})" in result.stderr
    )
    assert "pip install 'exclusive-placement[sim]'" in result.stderr


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
    extras = project["optional-dependencies"]
    assert isinstance(extras, dict)
    runtime, sim, dev = (
        pins(ROOT / f) for f in ("requirements.txt", "requirements-sim.txt", "requirements-dev.txt")
    )
    dependencies = project["dependencies"]
    assert isinstance(dependencies, list)
    assert declared(dependencies).items() <= runtime.items()
    assert declared(extras["sim"]).items() <= sim.items()
    assert declared(extras["dev"]).items() <= dev.items()


def test_the_runtime_requirements_hold_nothing_of_the_sim_extra(project: dict[str, object]) -> None:
    runtime = pins(ROOT / "requirements.txt")
    extras = project["optional-dependencies"]
    assert isinstance(extras, dict)
    for requirement in extras["sim"]:
        name = normalise(requirement.split("==")[0])
        if name != "pyyaml":  # also a dependency of the kubernetes client
            assert name not in runtime


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


def test_pip_install_brings_the_kubectl_plugins_console_script(tmp_path: Path) -> None:
    """The wheel `pip install .` installs: `kubectl-exclusive_placement` (kubectl finds it on PATH by that
    name) pointing at the plugin's main, and the plugin's package. Built from a copy of the sources, so the
    checkout is left untouched (the build backend is the pinned setuptools of the venv)."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in (*PRODUCT, "kubesim", "devstack", "bench"):
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
        scripts = archive.read(entry_points).decode()
    assert "kubectl-exclusive_placement = kubectl_plugin.cli:main" in scripts
    assert "kubectl_plugin/cli.py" in names
