"""`make kube`: build the real control plane from the Go tools module in cluster/.

Each binary is `go build` of a package of a pinned module, `CGO_ENABLED=0 -trimpath`, from the Go module
cache and the Go build cache (both reused across builds and checkouts). The manifests the local cluster
needs are taken from the same pinned modules: JobSet's CRD, its webhook configurations and their patches,
its controller's ClusterRole, and kwok's Stage manifests. Everything goes to a staging directory first and
is renamed into place at the end, so an interrupted build never leaves a half-built cache that looks done.

Errors are one line that names what is missing (the `go` command, a module the proxy refuses).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from devstack.controlplane.versions import (
    ETCD_MODULE,
    GO_MODULE_DIR,
    JOBSET_MODULE,
    KUBERNETES_MODULE,
    KWOK_MODULE,
    PINNED_MODULES,
    BuildLayout,
    current_layout,
)

MINIMUM_GO = (1, 26)
_GO_VERSION = re.compile(r"go(?P<major>\d+)\.(?P<minor>\d+)")
_MODULE_AT_VERSION = re.compile(r"(?P<module>[\w.\-/]+@v[\w.\-+]+)")


class BuildError(RuntimeError):
    """A build that cannot go on; the message is the one line `make kube` prints."""


@dataclass(frozen=True)
class Module:
    path: str
    version: str
    directory: Path
    released: str
    """The release time the proxy records, RFC 3339: the build date stamped into the binaries."""


@dataclass(frozen=True)
class GoBinary:
    name: str
    package: str
    module: str
    version_flags: Callable[[Module], dict[str, str]]
    """`-X` linker settings (variable -> value) that make `--version` name the pinned release."""


def _kubernetes_version(module: Module) -> dict[str, str]:
    major, minor = module.version.lstrip("v").split(".")[:2]
    settings: dict[str, str] = {}
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        settings |= {
            f"{package}.gitVersion": module.version,
            f"{package}.gitMajor": major,
            f"{package}.gitMinor": minor,
            f"{package}.buildDate": module.released,
        }
    return settings


def _kwok_version(module: Module) -> dict[str, str]:
    return {"sigs.k8s.io/kwok/pkg/consts.Version": module.version.lstrip("v")}


def _jobset_version(module: Module) -> dict[str, str]:
    return {"sigs.k8s.io/jobset/pkg/version.GitVersion": module.version}


def _no_version_flags(_module: Module) -> dict[str, str]:
    return {}  # etcd's version is a constant of its api module


BINARIES: tuple[GoBinary, ...] = (
    GoBinary(
        "kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver", KUBERNETES_MODULE, _kubernetes_version
    ),
    GoBinary(
        "kube-controller-manager",
        "k8s.io/kubernetes/cmd/kube-controller-manager",
        KUBERNETES_MODULE,
        _kubernetes_version,
    ),
    GoBinary(
        "kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler", KUBERNETES_MODULE, _kubernetes_version
    ),
    GoBinary("etcd", ETCD_MODULE, ETCD_MODULE, _no_version_flags),
    GoBinary("kwok", "sigs.k8s.io/kwok/cmd/kwok", KWOK_MODULE, _kwok_version),
    GoBinary("kwokctl", "sigs.k8s.io/kwok/cmd/kwokctl", KWOK_MODULE, _kwok_version),
    GoBinary("jobset-controller", JOBSET_MODULE, JOBSET_MODULE, _jobset_version),
)

MANIFESTS: dict[str, tuple[str, str]] = {
    # destination under manifests/ -> (module, path inside the module)
    "jobset/crd.yaml": (JOBSET_MODULE, "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"),
    "jobset/webhook-manifests.yaml": (JOBSET_MODULE, "config/components/webhook/manifests.yaml"),
    "jobset/mutating-patch.yaml": (JOBSET_MODULE, "config/components/webhook/patches/mutating-patch.yaml"),
    "jobset/validating-patch.yaml": (
        JOBSET_MODULE,
        "config/components/webhook/patches/validating-patch.yaml",
    ),
    "jobset/manager-role.yaml": (JOBSET_MODULE, "config/components/rbac/role.yaml"),
    "kwok/node-initialize.yaml": (KWOK_MODULE, "kustomize/stage/node/fast/node-initialize.yaml"),
    "kwok/node-heartbeat-with-lease.yaml": (
        KWOK_MODULE,
        "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    ),
    "kwok/pod-ready.yaml": (KWOK_MODULE, "kustomize/stage/pod/fast/pod-ready.yaml"),
    "kwok/pod-complete.yaml": (KWOK_MODULE, "kustomize/stage/pod/general/pod-complete.yaml"),
    "kwok/pod-delete.yaml": (KWOK_MODULE, "kustomize/stage/pod/fast/pod-delete.yaml"),
}


def go_environment() -> dict[str, str]:
    return {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly", "GOTOOLCHAIN": "local"}


def _run_go(args: Sequence[str], module_dir: Path) -> str:
    try:
        result = subprocess.run(
            ["go", *args], cwd=module_dir, env=go_environment(), capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise BuildError(go_missing_message()) from None
    if result.returncode != 0:
        raise BuildError(explain_go_failure(args, result.stderr))
    return result.stdout


def go_missing_message() -> str:
    required = ".".join(map(str, MINIMUM_GO))
    return f"make kube needs the Go toolchain (go {required} or newer): no `go` command on PATH"


def explain_go_failure(args: Sequence[str], stderr: str) -> str:
    """The one line that says what failed: the refused module when there is one, else go's last error."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        lowered = line.lower()
        if any(word in lowered for word in ("refused", "forbidden", "not found", "410 gone", "404", "403")):
            match = _MODULE_AT_VERSION.search(line)
            if match:
                return f"make kube: the Go module proxy refused {match['module']}: {line}"
    last = lines[-1] if lines else "no output"
    return f"make kube: `go {' '.join(args[:2])}` failed: {last}"


def check_go() -> str:
    """The local Go version, or `BuildError` if there is none or it is too old."""
    if shutil.which("go") is None:
        raise BuildError(go_missing_message())
    reported = _run_go(["env", "GOVERSION"], GO_MODULE_DIR).strip()
    match = _GO_VERSION.match(reported)
    if match is None or (int(match["major"]), int(match["minor"])) < MINIMUM_GO:
        required = ".".join(map(str, MINIMUM_GO))
        raise BuildError(f"make kube needs go {required} or newer; `go env GOVERSION` says {reported!r}")
    return reported


def download_modules(module_dir: Path = GO_MODULE_DIR) -> dict[str, Module]:
    """Fetch the pinned modules (and only what they need to build) into the module cache."""
    modules: dict[str, Module] = {}
    for path in PINNED_MODULES:
        info = json.loads(_run_go(["mod", "download", "-json", path], module_dir))
        if info.get("Error"):
            raise BuildError(
                f"make kube: the Go module proxy refused {path}@{info.get('Version')}: {info['Error']}"
            )
        released = json.loads(Path(info["Info"]).read_text()).get("Time", "")
        modules[path] = Module(path, info["Version"], Path(info["Dir"]), released)
    return modules


def build_binary(binary: GoBinary, module: Module, out: Path, module_dir: Path = GO_MODULE_DIR) -> None:
    settings = binary.version_flags(module)
    ldflags = " ".join(["-s", "-w", *(f"-X {name}={value}" for name, value in sorted(settings.items()))])
    _run_go(["build", "-trimpath", "-ldflags", ldflags, "-o", str(out), binary.package], module_dir)


def stage_manifests(modules: dict[str, Module], manifests_dir: Path) -> None:
    for destination, (module_path, source) in MANIFESTS.items():
        origin = modules[module_path].directory / source
        if not origin.is_file():
            raise BuildError(f"make kube: {module_path}@{modules[module_path].version} has no {source}")
        target = manifests_dir / destination
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(origin.read_bytes())  # the module cache's files are read-only: copy the bytes


def _say(message: str) -> None:
    print(message, flush=True)


def build(layout: BuildLayout | None = None, *, force: bool = False) -> BuildLayout:
    """Build every binary and stage the manifests into `layout` (the current pins' cache directory)."""
    layout = layout or current_layout()
    if layout.complete and not force:
        _say(f"control plane already built: {layout.bin_dir}")
        return layout
    go_version = check_go()
    started = time.monotonic()
    _say(f"building the control plane with {go_version} into {layout.root} (cold: ~6-12 min on 2 cores)")
    modules = download_modules()
    staging = layout.root.with_name(layout.root.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "bin").mkdir(parents=True)
    for binary in BINARIES:
        module = modules[binary.module]
        _say(f"  go build {binary.package} ({module.path} {module.version})")
        build_binary(binary, module, staging / "bin" / binary.name)
    stage_manifests(modules, staging / "manifests")
    elapsed = time.monotonic() - started
    record = {
        "go": go_version,
        "modules": {path: module.version for path, module in modules.items()},
        "build_seconds": round(elapsed, 1),
    }
    (staging / ".complete").write_text(json.dumps(record, indent=2) + "\n")
    shutil.rmtree(layout.root, ignore_errors=True)
    staging.rename(layout.root)
    _say(f"control plane built in {elapsed:.0f} s: {layout.bin_dir}")
    return layout
