"""Two `make kube` at once into one cache both succeed, and a broken cache is rebuilt (with a fake `go` on
PATH that writes files, so no Go build runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from devstack.controlplane import build
from devstack.controlplane.binaries import MissingBinaries, require_built
from devstack.controlplane.versions import CACHE_ENV, current_layout

BUILD_TIMEOUT = 120.0

FAKE_GO = textwrap.dedent(
    """\
    #!{python}
    # A stand-in for `go`: `env`, `mod download -json` and `build -o` write what the real one would.
    import json, os, sys, time
    from pathlib import Path

    state = Path({state!r})
    args = sys.argv[1:]
    if args == ["env", "GOVERSION"]:
        print("go1.26.8")
    elif args == ["env", "GOCACHE"]:
        print(state / "gocache")
    elif args[:3] == ["mod", "download", "-json"]:
        module = args[3]
        directory = state / "modules" / module.replace("/", "_")
        for source in json.loads(os.environ["FAKE_GO_SOURCES"]).get(module, []):
            (directory / source).parent.mkdir(parents=True, exist_ok=True)
            (directory / source).write_text(f"{{module}} {{source}}\\n")
        info = state / "modules" / (module.replace("/", "_") + ".info")
        info.parent.mkdir(parents=True, exist_ok=True)
        info.write_text(json.dumps({{"Time": "2026-01-01T00:00:00Z"}}))
        print(json.dumps({{"Version": "v1.0.0", "Dir": str(directory), "Info": str(info)}}))
    elif args[0] == "build":
        # A build holds until the test says go (the file `release`): other builds start meanwhile.
        deadline = time.monotonic() + 60
        while not (state / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        out = Path(args[args.index("-o") + 1])
        out.write_bytes(b"binary " + args[-1].encode())
    else:
        sys.exit(f"fake go: unexpected {{args}}")
    """
)


def _manifest_sources() -> dict[str, list[str]]:
    sources: dict[str, list[str]] = {}
    for module, source in build.MANIFESTS.values():
        sources.setdefault(module, []).append(source)
    return sources


def _fake_go(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """The environment of a build that finds the fake `go` first on PATH and builds into tmp_path/cache, and
    the file whose creation lets the fake `go build` go on."""
    bin_dir = tmp_path / "fake-bin"
    state = tmp_path / "fake-go"
    bin_dir.mkdir()
    state.mkdir()
    go = bin_dir / "go"
    go.write_text(FAKE_GO.format(python=sys.executable, state=str(state)))
    go.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        CACHE_ENV: str(tmp_path / "cache"),
        "FAKE_GO_SOURCES": json.dumps(_manifest_sources()),
    }
    return env, state / "release"


def _read_until(process: subprocess.Popen[str], *needles: str) -> list[str]:
    """The lines `process` prints up to the first that contains one of `needles` (all, if it exits first)."""
    assert process.stdout is not None
    lines: list[str] = []
    for line in iter(process.stdout.readline, ""):
        lines.append(line)
        if any(needle in line for needle in needles):
            break
    return lines


def _start_build(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "devstack.controlplane", "build"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_two_builds_at_once_both_succeed_and_a_third_finds_every_piece(tmp_path: Path) -> None:
    env, release = _fake_go(tmp_path)
    first = _start_build(env)
    first_lines = _read_until(first, "  go build")  # the first build is inside its first `go build`
    second = _start_build(env)
    second_lines = _read_until(second, "waiting for it", "  go build")
    release.touch()
    first_lines.append(first.communicate(timeout=BUILD_TIMEOUT)[0])
    second_lines.append(second.communicate(timeout=BUILD_TIMEOUT)[0])
    outputs = ["".join(first_lines), "".join(second_lines)]
    assert [first.returncode, second.returncode] == [0, 0], outputs
    assert "control plane built in" in outputs[0]
    assert "another build of" in outputs[1]
    assert "control plane already built" in outputs[1]

    third = subprocess.run(
        [sys.executable, "-m", "devstack.controlplane", "build"],
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    assert third.returncode == 0, third.stdout + third.stderr
    assert "control plane already built" in third.stdout
    cache = tmp_path / "cache"
    layouts = [path for path in cache.iterdir() if path.is_dir()]
    assert [path.name for path in layouts] == [layouts[0].name]  # no staging directory left behind
    built = layouts[0]
    assert sorted(path.name for path in (built / "bin").iterdir()) == sorted(b.name for b in build.BINARIES)
    assert all((built / "manifests" / name).is_file() for name in build.MANIFESTS)


def test_a_cache_without_its_binaries_is_not_built_and_a_build_rebuilds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env, release = _fake_go(tmp_path)
    release.touch()
    monkeypatch.setenv(CACHE_ENV, env[CACHE_ENV])
    layout = current_layout()
    (layout.manifests_dir / "jobset").mkdir(parents=True)
    layout.marker.write_text("{}\n")  # what two racing builds used to leave: the marker, no bin/

    assert "kube-apiserver" in build.missing_pieces(layout)
    with pytest.raises(MissingBinaries, match=r"no kube-apiserver, kube-controller-manager"):
        require_built(layout)

    result = subprocess.run(
        [sys.executable, "-m", "devstack.controlplane", "build"],
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "is incomplete" in result.stdout
    assert build.missing_pieces(layout) == []
    assert require_built(layout) == layout


def test_the_announcement_says_cold_only_when_the_go_build_cache_is_empty(tmp_path: Path) -> None:
    assert "the Go build cache is empty: a cold build" in build.build_estimate(tmp_path / "absent")
    assert "is empty" in build.build_estimate(None)
    (tmp_path / "00").mkdir()
    warm = build.build_estimate(tmp_path)
    assert "is not empty" in warm
    assert "relink" in warm
