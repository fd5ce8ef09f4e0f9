"""Every Makefile target that starts devstack's Stack (the real control plane) depends on `make kube`, so a
fresh clone builds the control plane first instead of failing inside the run."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from bench.__main__ import BENCHMARKS

REPO = Path(__file__).resolve().parents[2]
STACK_MODULE = "devstack.stack"
DEVSTACK_STACK_COMMANDS = {"run", "demo"}


def module_file(module: str) -> Path | None:
    base = REPO.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def project_imports(module: str) -> set[str]:
    """The repository's modules `module` imports, at its top or inside a function."""
    path = module_file(module)
    if path is None:
        return set()
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if module_file(name) is not None}


def reaches(start: str, target: str) -> bool:
    seen: set[str] = set()
    todo = [start]
    while todo:
        module = todo.pop()
        if module == target:
            return True
        if module not in seen:
            seen.add(module)
            todo.extend(project_imports(module))
    return False


def make_rules() -> dict[str, tuple[set[str], list[str]]]:
    """{target: (prerequisites, recipe lines)} of the Makefile's documented targets."""
    rules: dict[str, tuple[set[str], list[str]]] = {}
    current: list[str] | None = None
    for line in (REPO / "Makefile").read_text().splitlines():
        rule = re.match(r"^([a-zA-Z_-]+):([^=]*?)(?:##.*)?$", line)
        if rule and "##" in line:
            current = []
            rules[rule.group(1)] = (set(rule.group(2).split()), current)
        elif line.startswith("\t") and current is not None:
            current.append(line.strip())
        elif not line.startswith("\t"):
            current = None
    return rules


def starts_the_stack(command: str) -> bool:
    found = re.search(r"\$\(PY\) -m (bench|devstack) (\S+)", command)
    if found is None:
        return False
    package, sub = found.groups()
    if package == "devstack":
        return sub in DEVSTACK_STACK_COMMANDS
    return sub in BENCHMARKS and reaches(BENCHMARKS[sub], STACK_MODULE)


def test_the_import_walk_tells_the_benchmarks_on_the_control_plane_from_the_others() -> None:
    assert reaches(BENCHMARKS["resizer"], STACK_MODULE)  # through bench.scale
    assert reaches(BENCHMARKS["strategies"], STACK_MODULE)
    assert not reaches(BENCHMARKS["webhook"], STACK_MODULE)


def test_every_target_that_starts_the_stack_depends_on_kube() -> None:
    rules = make_rules()
    on_the_stack = {
        target for target, (_, recipe) in rules.items() if any(starts_the_stack(line) for line in recipe)
    }
    assert {"run", "demo", "bench", "bench-resizer", "bench-scale", "soak"} <= on_the_stack
    assert "bench-webhook" not in on_the_stack
    missing = sorted(target for target in on_the_stack if "kube" not in rules[target][0])
    assert missing == [], f"these targets start the real control plane without depending on kube: {missing}"
