"""Where the built control plane is, or a clear error naming the make target that builds it."""

from __future__ import annotations

from devstack.controlplane.build import BINARIES
from devstack.controlplane.versions import BuildLayout, current_layout

BUILD_TARGET = "make kube"


class MissingBinaries(RuntimeError):
    """The real control plane has not been built for the current pins."""


def require_built(layout: BuildLayout | None = None) -> BuildLayout:
    layout = layout or current_layout()
    missing = [binary.name for binary in BINARIES if not layout.binary(binary.name).is_file()]
    if not layout.complete or missing:
        what = ", ".join(missing) if missing else "the build did not finish"
        raise MissingBinaries(
            f"the real control plane is not built for cluster/go.mod's pins ({what}; expected in "
            f"{layout.bin_dir}): run `{BUILD_TARGET}` first (about 6-12 minutes cold on 2 cores)"
        )
    return layout
