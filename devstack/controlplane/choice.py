"""`--control-plane kube`: the flag of `devstack run|demo` and `bench strategies` that names the cluster.

The real control plane `make kube` builds is the only one since the simulator was retired. The flag is
kept, with that one choice, so that documented commands and scripts naming it keep working; any other
value is refused with a line saying so.
"""

from __future__ import annotations

import argparse

CONTROL_PLANE = "kube"
CONTROL_PLANES = (CONTROL_PLANE,)
HELP = (
    "the cluster to run on: %(default)s, the real control plane built by `make kube`, is the only one (the "
    "flag is kept so that documented commands and scripts naming it keep working)"
)


def control_plane_name(text: str) -> str:
    if text not in CONTROL_PLANES:
        raise argparse.ArgumentTypeError(
            f"invalid choice: {text!r} (choose from {', '.join(map(repr, CONTROL_PLANES))}: the real control "
            f"plane built by `make kube` is the only one; the simulator was retired)"
        )
    return text


def add_control_plane_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--control-plane",
        type=control_plane_name,
        choices=CONTROL_PLANES,
        default=CONTROL_PLANE,
        help=HELP,
    )
