"""Where the built control plane is, or a clear error naming the make target that builds it."""

from __future__ import annotations

from devstack.controlplane.build import missing_pieces
from devstack.controlplane.versions import BuildLayout, current_layout

BUILD_TARGET = "make kube"


class MissingBinaries(RuntimeError):
    """The real control plane has not been built for the current pins."""


def require_built(layout: BuildLayout | None = None) -> BuildLayout:
    layout = layout or current_layout()
    missing = missing_pieces(layout)
    if missing:
        if not layout.root.is_dir():
            what = "nothing is built"
        elif missing == [layout.marker.name]:
            what = "the build did not finish"
        else:
            what = "no " + ", ".join(missing[:4]) + (", ..." if len(missing) > 4 else "")
        raise MissingBinaries(
            f"the real control plane is not built for cluster/go.mod's pins ({what}; expected in "
            f"{layout.bin_dir}): run `{BUILD_TARGET}` first (a cold build: about 7-8 minutes on an idle "
            "2-core machine)"
        )
    return layout
