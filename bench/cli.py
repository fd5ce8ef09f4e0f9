"""The command line the load benchmarks share (`python -m bench resizer`, `python -m bench scale`).

Both run Jobs arriving at a rate on a cluster of nodes in pools, wait for them, and write one JSON file:
`--nodes --pools --jobs --rate --timeout` (defaults differ under `--quick`, a small run for the test suite),
`--out`. A bad value exits with status 2 and one line saying which.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from bench.paths import SCRATCH

DEFAULT_OUT = SCRATCH


@dataclass(frozen=True)
class Load:
    """Jobs arriving at `rate` per second on `nodes` nodes in `pools` domains, waited for `timeout` s."""

    nodes: int
    pools: int
    jobs: int
    rate: float
    timeout: float


def benchmark_parser(prog: str, description: str | None, result_file: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"directory for {result_file} (default: %(default)s)"
    )
    parser.add_argument("--quick", action="store_true", help="a small run for the test suite")
    return parser


def add_load_arguments(parser: argparse.ArgumentParser, full: Load, quick: Load) -> None:
    """`--nodes --pools --jobs --rate --timeout`, each defaulting to `full`'s value (`quick`'s with
    `--quick`)."""
    for flag, kind, what in (
        ("nodes", int, "nodes of the cluster"),
        ("pools", int, "its domains (node pools)"),
        ("jobs", int, "Jobs created"),
        ("rate", float, "Jobs created per second"),
        ("timeout", float, "seconds to wait for every resize"),
    ):
        parser.add_argument(
            f"--{flag}",
            type=kind,
            default=None,
            help=f"{what} (default {getattr(full, flag):g}; quick: {getattr(quick, flag):g})",
        )


def load_from(parser: argparse.ArgumentParser, args: argparse.Namespace, full: Load, quick: Load) -> Load:
    """The load the arguments ask for; a bad value exits through `parser.error`."""
    given = {field.name: value for field in fields(Load) if (value := getattr(args, field.name)) is not None}
    load = replace(quick if args.quick else full, **given)
    if min(load.nodes, load.pools, load.jobs) < 1 or load.rate <= 0 or load.timeout <= 0:
        parser.error("--nodes, --pools, --jobs, --rate and --timeout must be positive")
    if load.pools > load.nodes:
        parser.error(f"--pools ({load.pools}) cannot exceed --nodes ({load.nodes})")
    return load


def write_result(result: dict[str, Any], out: Path, name: str, summary: str) -> int:
    """Write `result` to out/name, print the summary; exit status 0 when every Job was resized."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(summary)
    print(f"wrote {path}")
    return 0 if result["met"]["all_resized"] else 1
