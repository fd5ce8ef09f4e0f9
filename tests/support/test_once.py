"""`once_per_session`: one run of an expensive producer per session, whichever xdist worker asks first."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.once import XDIST_RUN_ID, once_per_session


def a_run_id() -> str:
    """A session id of its own: without xdist the shared directory outlives the session."""
    return f"run-{uuid.uuid4().hex}"


class Producer:
    def __init__(self) -> None:
        self.dirs: list[Path] = []

    def __call__(self, out: Path) -> dict[str, Any]:
        self.dirs.append(out)
        (out / "report.txt").write_text("written")
        return {"run": len(self.dirs), "files": sorted(p.name for p in out.iterdir())}


def test_under_xdist_the_second_ask_reads_the_first_result(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(XDIST_RUN_ID, a_run_id())
    produce = Producer()
    first = once_per_session(tmp_path_factory, "expensive", produce)
    second = once_per_session(tmp_path_factory, "expensive", produce)
    assert first == second == {"run": 1, "files": ["report.txt"]}
    assert len(produce.dirs) == 1


def test_another_session_or_name_runs_again(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    produce = Producer()
    monkeypatch.setenv(XDIST_RUN_ID, a_run_id())
    once_per_session(tmp_path_factory, "expensive", produce)
    once_per_session(tmp_path_factory, "other", produce)
    monkeypatch.setenv(XDIST_RUN_ID, a_run_id())
    once_per_session(tmp_path_factory, "expensive", produce)
    assert len(produce.dirs) == 3
    assert len(set(produce.dirs)) == 3


def test_without_xdist_every_ask_runs_in_a_fresh_directory(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(XDIST_RUN_ID, raising=False)
    produce = Producer()
    once_per_session(tmp_path_factory, "expensive", produce)
    once_per_session(tmp_path_factory, "expensive", produce)
    assert len(produce.dirs) == 2
    assert produce.dirs[0] != produce.dirs[1]
