"""`python -m devstack.controlplane build|path|replaces`: what `make kube` runs.

build     build the binaries (at once if they are already there) into .cache/kube/<pins>/bin
path      print that directory, or exit 1 naming `make kube` if it is not built
replaces  regenerate cluster/go.mod's replace lines from the pinned k8s.io/kubernetes' go.mod
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from devstack.controlplane.binaries import MissingBinaries, require_built
from devstack.controlplane.build import BuildError, build
from devstack.controlplane.replaces import sync_replaces
from devstack.controlplane.versions import PinError


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devstack.controlplane",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=("build", "path", "replaces"))
    parser.add_argument("--force", action="store_true", help="build: rebuild even when the binaries exist")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            build(force=args.force)
        elif args.command == "path":
            print(require_built().bin_dir)
        else:
            modules = sync_replaces()
            print(f"cluster/go.mod: {len(modules)} replace lines; now run `cd cluster && go mod tidy`")
    except (BuildError, MissingBinaries, PinError) as err:
        print(err, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
