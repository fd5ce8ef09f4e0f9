"""`python -m kubesim serve ...`: run the simulated control plane until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import signal
import sys
import types
import typing
from pathlib import Path
from typing import Any

from kubesim.controllers import ControllerSettings
from kubesim.runner import DEFAULT_KUBECONFIG, Running, ServeOptions, serve

# ControllerSettings fields the serve command sets from its own flags.
OWN_FLAGS = frozenset({"time_scale", "seed"})


def _controller_fields() -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(ControllerSettings) if f.name not in OWN_FLAGS]


def _parser_for(annotation: Any) -> Any:
    """argparse `type=` for a settings field annotation (bool / int / float / str, optionally | None)."""
    hints = annotation
    if isinstance(hints, str):
        hints = {
            "bool": bool,
            "int": int,
            "float": float,
            "str": str,
            "float | None": float,
            "int | None": int,
        }.get(hints, str)
    if isinstance(hints, types.UnionType) or typing.get_origin(hints) is typing.Union:
        hints = next(a for a in typing.get_args(hints) if a is not type(None))
    if hints is bool:
        return lambda text: text.lower() in ("1", "true", "yes", "on")
    return hints


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kubesim", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve_cmd = commands.add_parser("serve", help="serve the simulated API server and controllers")
    serve_cmd.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    serve_cmd.add_argument(
        "--port", type=int, default=6443, help="listen port; 0 picks a free one (default 6443)"
    )
    serve_cmd.add_argument("--nodes", type=int, default=64, help="generated nodes (default 64)")
    serve_cmd.add_argument(
        "--pools", type=int, default=8, help="node pools the nodes are split into (default 8)"
    )
    serve_cmd.add_argument("--gpus-per-node", type=int, default=8, help="nvidia.com/gpu per node (default 8)")
    serve_cmd.add_argument(
        "--time-scale", type=float, default=1.0, help="real seconds per simulated second (0.01 = 100x faster)"
    )
    serve_cmd.add_argument(
        "--kubeconfig",
        type=Path,
        default=DEFAULT_KUBECONFIG,
        help=f"where to write the kubeconfig ({DEFAULT_KUBECONFIG})",
    )
    serve_cmd.add_argument(
        "--tls", action="store_true", help="serve HTTPS with a generated CA (in the kubeconfig)"
    )
    serve_cmd.add_argument(
        "--faults",
        default=None,
        help="fault injection for external requests, e.g. error-rate=0.1,error-codes=429+500,latency-ms=20,"
        "drop-watch-after=5-30",
    )
    serve_cmd.add_argument(
        "--seed", type=int, default=None, help="seed for names, uids, faults and controllers"
    )
    serve_cmd.add_argument(
        "--no-controllers", action="store_true", help="serve the API only (no Job controller, ...)"
    )
    serve_cmd.add_argument(
        "--watch-history", type=int, default=10_000, help="events kept per resource for watches"
    )
    serve_cmd.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    group = serve_cmd.add_argument_group(
        "controller settings (kubesim.controllers.settings.ControllerSettings)"
    )
    for item in _controller_fields():
        default = item.default if item.default is not dataclasses.MISSING else None
        group.add_argument(
            "--" + item.name.replace("_", "-"),
            dest=f"ctl_{item.name}",
            metavar="VALUE",
            type=_parser_for(item.type),
            default=None,
            help=f"default {default}",
        )
    return parser


def options_from_args(args: argparse.Namespace) -> ServeOptions:
    overrides = {
        key.removeprefix("ctl_"): value
        for key, value in vars(args).items()
        if key.startswith("ctl_") and value is not None
    }
    return ServeOptions(
        host=args.host,
        port=args.port,
        nodes=args.nodes,
        pools=args.pools,
        gpus_per_node=args.gpus_per_node,
        time_scale=args.time_scale,
        kubeconfig=args.kubeconfig,
        tls=args.tls,
        faults=args.faults,
        seed=args.seed,
        controllers=not args.no_controllers,
        controller_overrides=overrides,
        watch_history=args.watch_history,
    )


def _announce(running: Running) -> None:
    # One machine-readable line (tests and devstack parse it).
    print(f"kubesim listening on {running.url} kubeconfig={running.kubeconfig}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        options = options_from_args(args)
        options.validate()
    except (ValueError, TypeError) as exc:
        print(f"kubesim: {exc}", file=sys.stderr)
        return 2
    # uvicorn re-raises the signal it caught after shutting down: make SIGTERM's a no-op so we exit 0.
    signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        import uvloop

        uvloop.run(serve(options, on_ready=_announce))
    except ImportError:
        asyncio.run(serve(options, on_ready=_announce))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
