"""Generate cluster/go.mod's `replace` block from k8s.io/kubernetes' own go.mod.

k8s.io/kubernetes requires each of its staging modules (k8s.io/api, k8s.io/client-go, …) at `v0.0.0` and
resolves them through `replace` lines to its `staging/` directory, which a consumer does not have. A module
that builds its commands therefore replaces every one of them with the published `v0.<minor>.<patch>` of the
same release. The list changes between releases (1.36 added k8s.io/cri-streaming and k8s.io/streaming), so
it is generated, never typed:

    python -m devstack.controlplane replaces      # rewrite the block for the pinned Kubernetes, then
    cd cluster && go mod tidy
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from devstack.controlplane.build import BuildError, go_environment
from devstack.controlplane.versions import GO_MODULE_DIR, KUBERNETES_MODULE, pinned_versions

_STAGING_REQUIREMENT = re.compile(r"^\s*(?P<module>k8s\.io/[\w.\-]+)\s+v0\.0\.0\s*$")
_REPLACE_BLOCK = re.compile(r"\nreplace \(\n.*?\n\)\n", re.DOTALL)


def staging_modules(kubernetes_go_mod: str) -> list[str]:
    """The modules k8s.io/kubernetes requires at v0.0.0 (its staging modules), sorted."""
    return sorted(
        {
            match["module"]
            for line in kubernetes_go_mod.splitlines()
            if (match := _STAGING_REQUIREMENT.match(line.split("//", 1)[0]))
        }
    )


def staging_version(kubernetes_version: str) -> str:
    """v1.36.3 -> v0.36.3: the staging modules are published with major version 0."""
    major, rest = kubernetes_version.lstrip("v").split(".", 1)
    if major != "1":
        raise ValueError(f"unexpected Kubernetes version {kubernetes_version!r}")
    return f"v0.{rest}"


def replace_block(modules: list[str], version: str) -> str:
    lines = "".join(f"\t{module} => {module} {version}\n" for module in modules)
    return f"\nreplace (\n{lines})\n"


def rewrite_replaces(go_mod_text: str, block: str) -> str:
    if _REPLACE_BLOCK.search(go_mod_text):
        return _REPLACE_BLOCK.sub(lambda _match: block, go_mod_text, count=1)
    return go_mod_text.rstrip("\n") + "\n" + block


def kubernetes_go_mod(version: str, module_dir: Path = GO_MODULE_DIR) -> str:
    result = subprocess.run(
        ["go", "mod", "download", "-json", f"{KUBERNETES_MODULE}@{version}"],
        cwd=module_dir,
        env=go_environment(),
        capture_output=True,
        text=True,
        check=False,
    )
    info = json.loads(result.stdout or "{}")
    if result.returncode != 0 or info.get("Error"):
        raise BuildError(
            f"the Go module proxy refused {KUBERNETES_MODULE}@{version}: {info.get('Error', result.stderr)}"
        )
    return Path(info["GoMod"]).read_text()


def sync_replaces(module_dir: Path = GO_MODULE_DIR) -> list[str]:
    """Rewrite module_dir/go.mod's replace block for the pinned Kubernetes; returns the replaced modules."""
    version = pinned_versions(module_dir).kubernetes
    modules = staging_modules(kubernetes_go_mod(version, module_dir))
    go_mod = module_dir / "go.mod"
    go_mod.write_text(rewrite_replaces(go_mod.read_text(), replace_block(modules, staging_version(version))))
    return modules
