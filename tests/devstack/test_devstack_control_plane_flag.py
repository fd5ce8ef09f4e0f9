"""`--control-plane kube`, as documented (`devstack run --control-plane kube --kueue`, `devstack demo
--control-plane kube`, `bench strategies --control-plane kube`): accepted, the default, the only choice."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.strategies import build_parser as bench_strategies_parser
from devstack.__main__ import build_parser, options_from
from devstack.__main__ import main as devstack_main
from devstack.controlplane.choice import CONTROL_PLANE

PARSERS: dict[str, tuple[Callable[[], argparse.ArgumentParser], list[str]]] = {
    "devstack run": (build_parser, ["run"]),
    "devstack demo": (build_parser, ["demo"]),
    "bench strategies": (bench_strategies_parser, []),
}


def test_run_takes_the_control_plane_with_kueue() -> None:
    args = build_parser().parse_args(["run", "--control-plane", "kube", "--kueue"])
    assert (args.command, args.control_plane, args.kueue) == ("run", "kube", True)
    assert options_from(args).kueue is True


def test_demo_takes_the_control_plane() -> None:
    args = build_parser().parse_args(["demo", "--control-plane", "kube"])
    assert (args.command, args.control_plane) == ("demo", "kube")


@pytest.mark.parametrize("command", PARSERS)
def test_the_control_plane_defaults_to_the_real_one(command: str) -> None:
    parser, argv = PARSERS[command]
    assert parser().parse_args(argv).control_plane == CONTROL_PLANE == "kube"


@pytest.mark.parametrize("command", PARSERS)
def test_the_retired_simulator_is_refused_naming_the_choice(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser, argv = PARSERS[command]
    with pytest.raises(SystemExit) as exited:
        parser().parse_args([*argv, "--control-plane", "kubesim"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --control-plane: invalid choice: 'kubesim' (choose from 'kube'" in err
    assert "the only one" in err


@pytest.mark.parametrize("command", PARSERS)
def test_the_help_says_the_real_control_plane_is_the_only_one(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser, argv = PARSERS[command]
    with pytest.raises(SystemExit):
        parser().parse_args([*argv, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--control-plane {kube}" in text
    assert "kube, the real control plane built by `make kube`, is the only one" in text


def test_run_with_the_flag_checks_the_manifest_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text("kind: JobSet\n")
    argv = [
        "run",
        "--control-plane",
        "kube",
        "--kueue",
        "-f",
        str(manifest),
        "--workdir",
        str(tmp_path / "w"),
    ]
    assert devstack_main(argv) == 2
    assert "needs apiVersion" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()
