"""`make kube`: build the real control plane from the Go tools module in cluster/.

Each binary is `go build` of a package of a pinned module, `CGO_ENABLED=0 -trimpath`, from the Go module
cache and the Go build cache (both reused across builds and checkouts). The manifests the local cluster
needs are taken from the same pinned modules: JobSet's CRD, its webhook configurations and their patches,
its controller's ClusterRole, kwok's Stage manifests, and Kueue's CRDs, webhook configurations and manager
ClusterRole. Kueue is downloaded and built from its own tools module (`cluster/kueue/go.mod`), so that its
requirements never move the control plane's dependencies.

Two builds may run at once (two terminals, `make test` beside `make kube`): each takes an exclusive lock on
`<cache>/<pins>.lock` first, so the second waits for the first and then finds it built. Each build writes into
its own staging directory (`<pins>.partial-XXXX`, beside the cache directory) renamed into place at the end,
so an interrupted build never leaves a half-built cache that looks done. "Built" means every binary and every
manifest is there, not only the marker: a cache missing any of them is rebuilt.

Errors are one line that names what is missing (the `go` command, a module the proxy refuses).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from devstack.controlplane.versions import (
    COMPLETE_MARKER,
    ETCD_MODULE,
    GO_MODULE_DIR,
    HEY_MODULE,
    JOBSET_MODULE,
    KUBERNETES_MODULE,
    KUEUE_MODULE,
    KWOK_MODULE,
    PINNED_MODULES,
    TOXIPROXY_MODULE,
    BuildLayout,
    current_layout,
    kueue_module_dir,
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
    module_dir: Path = GO_MODULE_DIR
    """The Go tools module it is built from (the directory of its go.mod)."""


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


def _toxiproxy_version(module: Module) -> dict[str, str]:
    return {"github.com/Shopify/toxiproxy/v2.Version": module.version.lstrip("v")}


def _kueue_version(module: Module) -> dict[str, str]:
    return {
        "sigs.k8s.io/kueue/pkg/version.GitVersion": module.version,
        "sigs.k8s.io/kueue/pkg/version.BuildDate": module.released,
    }


def _no_version_flags(_module: Module) -> dict[str, str]:
    return {}  # etcd's version is a constant of its api module; hey prints none


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
    GoBinary("toxiproxy", f"{TOXIPROXY_MODULE}/cmd/server", TOXIPROXY_MODULE, _toxiproxy_version),
    GoBinary("hey", HEY_MODULE, HEY_MODULE, _no_version_flags),
    GoBinary(
        "kueue", f"{KUEUE_MODULE}/cmd/kueue", KUEUE_MODULE, _kueue_version, kueue_module_dir(GO_MODULE_DIR)
    ),
)

KUEUE_CRDS = (
    "admissionchecks",
    "clusterqueues",
    "cohorts",
    "localqueues",
    "multikueueclusters",
    "multikueueconfigs",
    "provisioningrequestconfigs",
    "resourceflavors",
    "topologies",
    "workloadpriorityclasses",
    "workloads",
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
    **{
        f"kueue/crd/{name}.yaml": (KUEUE_MODULE, f"config/components/crd/bases/kueue.x-k8s.io_{name}.yaml")
        for name in KUEUE_CRDS
    },
    "kueue/webhook-manifests.yaml": (KUEUE_MODULE, "config/components/webhook/manifests.yaml"),
    "kueue/manager-role.yaml": (KUEUE_MODULE, "config/components/rbac/role.yaml"),
    "kueue/manager-secrets-role.yaml": (KUEUE_MODULE, "config/components/rbac/manager_secrets_role.yaml"),
}
MODULE_DIRS: dict[str, Path] = {KUEUE_MODULE: kueue_module_dir(GO_MODULE_DIR)}
"""The modules pinned apart from cluster/go.mod, and the tools module that pins each."""


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
    """Fetch the pinned modules (and only what they need to build) into the module cache, each through
    the tools module that pins it."""
    modules: dict[str, Module] = {}
    pinned = [(path, module_dir) for path in PINNED_MODULES]
    pinned += [(path, kueue_module_dir(module_dir)) for path in MODULE_DIRS]
    for path, directory in pinned:
        info = json.loads(_run_go(["mod", "download", "-json", path], directory))
        if info.get("Error"):
            raise BuildError(
                f"make kube: the Go module proxy refused {path}@{info.get('Version')}: {info['Error']}"
            )
        released = json.loads(Path(info["Info"]).read_text()).get("Time", "")
        modules[path] = Module(path, info["Version"], Path(info["Dir"]), released)
    return modules


def build_binary(binary: GoBinary, module: Module, out: Path) -> None:
    settings = binary.version_flags(module)
    ldflags = " ".join(["-s", "-w", *(f"-X {name}={value}" for name, value in sorted(settings.items()))])
    _run_go(["build", "-trimpath", "-ldflags", ldflags, "-o", str(out), binary.package], binary.module_dir)


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


def missing_pieces(layout: BuildLayout) -> list[str]:
    """What a build directory lacks (the marker, binaries, manifests, in that order); empty when built."""
    missing = [] if layout.complete else [layout.marker.name]
    missing += [binary.name for binary in BINARIES if not layout.binary(binary.name).is_file()]
    missing += [f"manifests/{name}" for name in MANIFESTS if not (layout.manifests_dir / name).is_file()]
    return missing


def lock_path(layout: BuildLayout) -> Path:
    return layout.root.with_name(layout.root.name + ".lock")


@contextmanager
def build_lock(layout: BuildLayout) -> Iterator[None]:
    """Hold the exclusive lock on `layout`'s cache directory; says so when another build holds it."""
    path = lock_path(layout)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _say(f"another build of {layout.root} is running (it holds {path}): waiting for it to finish")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def go_build_cache() -> Path | None:
    """The Go build cache directory, or None when go does not say (`GOCACHE=off`, an old go)."""
    reported = _run_go(["env", "GOCACHE"], GO_MODULE_DIR).strip()
    return Path(reported) if reported and reported != "off" else None


def build_estimate(cache: Path | None) -> str:
    """What this build will cost, as far as can be told before it runs: the Go build cache is either
    empty (every package compiles, a cold build) or holds packages `go build` reuses (unchanged pins
    only relink). Whether it holds these very packages only `go build` finds out."""
    cold = "a cold build, about 7-8 min on an idle 2-core machine (longer when it is busy)"
    if cache is None or not cache.is_dir() or not any(cache.iterdir()):
        return f"the Go build cache is empty: {cold}"
    return (
        f"the Go build cache {cache} is not empty: packages it holds are not recompiled (a relink of "
        f"unchanged pins took 24-60 s here); for packages it lacks, {cold}"
    )


def _remove_stale_staging(layout: BuildLayout) -> None:
    """Staging directories a killed build left (only called under the lock, so none is in use)."""
    for leftover in layout.root.parent.glob(layout.root.name + ".partial*"):
        shutil.rmtree(leftover, ignore_errors=True)


def _replace_atomically(staging: Path, root: Path) -> None:
    if root.exists():
        discarded = Path(tempfile.mkdtemp(prefix=root.name + ".partial-old-", dir=root.parent))
        root.rename(discarded / root.name)
        staging.rename(root)
        shutil.rmtree(discarded, ignore_errors=True)
    else:
        staging.rename(root)


def build(layout: BuildLayout | None = None, *, force: bool = False) -> BuildLayout:
    """Build every binary and stage the manifests into `layout` (the current pins' cache directory)."""
    layout = layout or current_layout()
    if not force and not missing_pieces(layout):
        _say(f"control plane already built: {layout.bin_dir}")
        return layout
    go_version = check_go()
    with build_lock(layout):
        missing = missing_pieces(layout)
        if not force and not missing:
            _say(f"control plane already built: {layout.bin_dir}")
            return layout
        if layout.root.exists() and missing:
            _say(f"{layout.root} is incomplete (no {', '.join(missing[:3])}): rebuilding it")
        _remove_stale_staging(layout)
        _build_into(layout, go_version)
    return layout


def _build_into(layout: BuildLayout, go_version: str) -> None:
    started = time.monotonic()
    estimate = build_estimate(go_build_cache())
    _say(f"building the control plane with {go_version} into {layout.root} ({estimate})")
    modules = download_modules()
    staging = Path(tempfile.mkdtemp(prefix=layout.root.name + ".partial-", dir=layout.root.parent))
    (staging / "bin").mkdir()
    binary_seconds: dict[str, float] = {}
    for binary in BINARIES:
        module = modules[binary.module]
        _say(f"  go build {binary.package} ({module.path} {module.version})")
        binary_started = time.monotonic()
        build_binary(binary, module, staging / "bin" / binary.name)
        binary_seconds[binary.name] = round(time.monotonic() - binary_started, 1)
    stage_manifests(modules, staging / "manifests")
    elapsed = time.monotonic() - started
    record = {
        "go": go_version,
        "modules": {path: module.version for path, module in modules.items()},
        "build_seconds": round(elapsed, 1),
        "binary_seconds": binary_seconds,
    }
    (staging / COMPLETE_MARKER).write_text(json.dumps(record, indent=2) + "\n")
    staging.chmod(0o755)  # mkdtemp makes it 0700; the cache is shared between checkouts
    _replace_atomically(staging, layout.root)
    _say(f"control plane built in {elapsed:.0f} s: {layout.bin_dir}")
