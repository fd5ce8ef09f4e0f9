"""Which real components the repository pins, and where their built binaries live.

The pins are the `require` lines of the Go tools module in `cluster/go.mod`; nothing else names a version.
Kueue is pinned apart, in its own tools module `cluster/kueue/go.mod`, and built from it: in the control
plane's module its requirements would move kube-apiserver's dependencies (cel-go among them) off upstream's.
The binaries go to `.cache/kube/<kubernetes version>-<hash of both modules' go.mod and go.sum>/bin`, outside
git, so a change of any pin (or of any dependency `go mod tidy` moved) builds into a new directory and an old
build is never mistaken for the current one.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
GO_MODULE_DIR = REPO_ROOT / "cluster"
KUEUE_MODULE_SUBDIR = "kueue"
"""Kueue's own tools module, under the control plane's module directory (a nested module: not part of it)."""
CACHE_ENV = "EXCLUSIVE_PLACEMENT_KUBE_CACHE"
"""Overrides the cache root (default `<repo>/.cache/kube`), e.g. to share one build between checkouts."""
COMPLETE_MARKER = ".complete"

KUBERNETES_MODULE = "k8s.io/kubernetes"
ETCD_MODULE = "go.etcd.io/etcd/server/v3"
KWOK_MODULE = "sigs.k8s.io/kwok"
JOBSET_MODULE = "sigs.k8s.io/jobset"
TOXIPROXY_MODULE = "github.com/Shopify/toxiproxy/v2"
HEY_MODULE = "github.com/rakyll/hey"
PINNED_MODULES = (KUBERNETES_MODULE, ETCD_MODULE, KWOK_MODULE, JOBSET_MODULE, TOXIPROXY_MODULE, HEY_MODULE)
KUEUE_MODULE = "sigs.k8s.io/kueue"

_REQUIRE_LINE = re.compile(r"^\s*(?:require\s+)?(?P<module>\S+)\s+(?P<version>v\S+)")


class PinError(RuntimeError):
    """cluster/go.mod is missing or does not pin one of the components."""


@dataclass(frozen=True)
class Versions:
    kubernetes: str
    etcd: str
    kwok: str
    jobset: str
    toxiproxy: str
    """The fault proxy devstack can put between this project's processes and kube-apiserver."""
    hey: str
    """The HTTP load generator `bench webhook` drives the webhook with."""
    kueue: str
    """Kueue's manager, pinned in `cluster/kueue/go.mod` (devstack runs it only when asked: `--kueue`)."""

    def as_dict(self) -> dict[str, str]:
        """The component versions as the benchmark results record them."""
        return {
            "kube-apiserver": self.kubernetes,
            "kube-controller-manager": self.kubernetes,
            "kube-scheduler": self.kubernetes,
            "etcd": self.etcd,
            "kwok": self.kwok,
            "jobset": self.jobset,
            "toxiproxy": self.toxiproxy,
        }  # Kueue's only where a benchmark runs it (bench.strategies.report_versions)


def module_requirements(go_mod: Path) -> dict[str, str]:
    """module path -> version, for every `require` of a go.mod (block or single-line form)."""
    requirements: dict[str, str] = {}
    in_block = False
    for raw in go_mod.read_text().splitlines():
        line = raw.split("//", 1)[0].strip()
        if line.startswith("require ("):
            in_block = True
            continue
        if in_block and line == ")":
            in_block = False
            continue
        if in_block or line.startswith("require "):
            match = _REQUIRE_LINE.match(line)
            if match:
                requirements[match["module"]] = match["version"]
    return requirements


def pinned_versions(module_dir: Path = GO_MODULE_DIR) -> Versions:
    go_mod = module_dir / "go.mod"
    if not go_mod.is_file():
        raise PinError(f"{go_mod} does not exist: the Go tools module that pins the control plane is missing")
    requirements = module_requirements(go_mod)
    missing = [module for module in PINNED_MODULES if module not in requirements]
    if missing:
        raise PinError(f"{go_mod} pins no version of {', '.join(missing)}")
    kueue_go_mod = kueue_module_dir(module_dir) / "go.mod"
    if not kueue_go_mod.is_file():
        raise PinError(f"{kueue_go_mod} does not exist: the Go tools module that pins Kueue is missing")
    kueue = module_requirements(kueue_go_mod).get(KUEUE_MODULE)
    if kueue is None:
        raise PinError(f"{kueue_go_mod} pins no version of {KUEUE_MODULE}")
    return Versions(
        kueue=kueue,
        kubernetes=requirements[KUBERNETES_MODULE],
        etcd=requirements[ETCD_MODULE],
        kwok=requirements[KWOK_MODULE],
        jobset=requirements[JOBSET_MODULE],
        toxiproxy=requirements[TOXIPROXY_MODULE],
        hey=requirements[HEY_MODULE],
    )


def kueue_module_dir(module_dir: Path = GO_MODULE_DIR) -> Path:
    return module_dir / KUEUE_MODULE_SUBDIR


def pins_digest(module_dir: Path = GO_MODULE_DIR) -> str:
    digest = hashlib.sha256()
    for directory in (module_dir, kueue_module_dir(module_dir)):
        for name in ("go.mod", "go.sum"):
            path = directory / name
            digest.update(path.read_bytes() if path.is_file() else b"")
    return digest.hexdigest()[:12]


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or REPO_ROOT / ".cache" / "kube")


@dataclass(frozen=True)
class BuildLayout:
    """The directories of one build: binaries, and the manifests taken from the pinned modules."""

    root: Path

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def manifests_dir(self) -> Path:
        return self.root / "manifests"

    @property
    def marker(self) -> Path:
        return self.root / COMPLETE_MARKER

    def binary(self, name: str) -> Path:
        return self.bin_dir / name

    @property
    def complete(self) -> bool:
        return self.marker.is_file()


def current_layout(module_dir: Path = GO_MODULE_DIR) -> BuildLayout:
    versions = pinned_versions(module_dir)
    return BuildLayout(cache_root() / f"{versions.kubernetes}-{pins_digest(module_dir)}")
