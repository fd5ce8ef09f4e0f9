"""kube-apiserver's CPU profile over each measured window (`bench strategies --profile-apiserver DIR`).

kube-apiserver serves Go's CPU profiler at `/debug/pprof/profile` (its `--profiling`, on by default; the
bench's admin credentials may read it). A profile covers a fixed number of seconds given up front, and a
window's length is known only once its pods run, so the window is recorded as consecutive profiles of
`CHUNK_SECONDS` each: from the counters' reset until the window's snapshot, the last one finishing up to
`CHUNK_SECONDS` after it. They are written as `DIR/<scenario>-<contender>-<run>.<k>.pb.gz` and, when a Go
toolchain is on PATH (the one `make kube` builds with), merged into `DIR/<scenario>-<contender>-<run>.pb.gz`
(`go tool pprof -proto`), which replaces them. Read one with `go tool pprof -top FILE`, or compare two
contenders with `go tool pprof -top -diff_base JOBSET.pb.gz ELASTIC.pb.gz` (docs/results.md, "How it is
measured").

Go's profiler samples 100 times a second: about 1 % of a core here, alike for every contender.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.counters import WindowCounters, WindowCounts

log = logging.getLogger(__name__)

PROFILE_PATH = "/debug/pprof/profile"
PROFILE_AGENT = "bench-profile"
"""The profile requests' user agent: `bench.audit` sets the benchmark's own instrumentation aside."""
CHUNK_SECONDS = 5
"""Seconds per recorded profile: the window's end is overshot by less than this."""
ANSWER_MARGIN = 30.0
"""Seconds past a chunk's end kube-apiserver may take to send it."""
MERGE_TIMEOUT = 120.0


class ProfileError(RuntimeError):
    pass


def chunk_name(stem: str, index: int) -> str:
    return f"{stem}.{index:03d}.pb.gz"


@dataclass(frozen=True)
class ProfileTarget:
    """Where one window's profile goes: `directory/stem...`."""

    directory: Path
    stem: str

    def chunk(self, index: int) -> Path:
        return self.directory / chunk_name(self.stem, index)

    @property
    def merged(self) -> Path:
        return self.directory / f"{self.stem}.pb.gz"


async def record_profile(http: httpx.AsyncClient, target: ProfileTarget, stop: asyncio.Event) -> list[Path]:
    """Consecutive CPU profiles of kube-apiserver until `stop` is set (the one running then is finished and
    kept); the files written, in order. ProfileError when kube-apiserver refuses one (no `--profiling`, no
    right to `/debug/pprof`, another profile already running)."""
    target.directory.mkdir(parents=True, exist_ok=True)
    chunks: list[Path] = []
    while not stop.is_set():
        response = await http.get(
            PROFILE_PATH,
            params={"seconds": CHUNK_SECONDS},
            timeout=httpx.Timeout(CHUNK_SECONDS + ANSWER_MARGIN),
            headers={"User-Agent": PROFILE_AGENT},
        )
        if response.status_code != 200:
            raise ProfileError(
                f"kube-apiserver answered {response.status_code} to {PROFILE_PATH}: {response.text[:200]}"
            )
        path = target.chunk(len(chunks))
        path.write_bytes(response.content)
        chunks.append(path)
    return chunks


def merge_profiles(
    chunks: list[Path], merged: Path, *, which: Callable[[str], str | None] = shutil.which
) -> bool:
    """`go tool pprof -proto` of the chunks into `merged`; False (and the chunks kept) without a Go
    toolchain on PATH."""
    go = which("go")
    if go is None or not chunks:
        return False
    with merged.open("wb") as out:
        done = subprocess.run(
            [go, "tool", "pprof", "-proto", *map(str, chunks)],
            stdout=out,
            stderr=subprocess.PIPE,
            text=False,
            timeout=MERGE_TIMEOUT,
            check=False,
        )
    if done.returncode != 0:
        merged.unlink(missing_ok=True)
        raise ProfileError(f"go tool pprof -proto failed: {done.stderr.decode(errors='replace')[-500:]}")
    return True


class ProfiledCounters:
    """A window's counters (`bench.counters.WindowCounters`) that also record kube-apiserver's CPU profile
    from the window's opening to its closing, into `target`."""

    def __init__(
        self,
        counters: WindowCounters,
        target: ProfileTarget,
        merge: Callable[[list[Path], Path], bool] = merge_profiles,
    ) -> None:
        self._counters = counters
        self.target = target
        self._merge = merge
        self._stop = asyncio.Event()
        self._recording: asyncio.Task[list[Path]] | None = None

    async def reset(self, http: httpx.AsyncClient) -> None:
        await self._counters.reset(http)
        self._stop.clear()
        self._recording = asyncio.create_task(record_profile(http, self.target, self._stop))

    async def snapshot(self, http: httpx.AsyncClient, namespaces: Sequence[str]) -> WindowCounts:
        self._stop.set()
        counts = await self._counters.snapshot(http, namespaces)
        if self._recording is None:
            raise ProfileError("snapshot() before reset(): no profile was recorded")
        chunks = await self._recording
        self._recording = None
        merged = await asyncio.to_thread(self._merge, chunks, self.target.merged)
        if merged:
            for chunk in chunks:
                chunk.unlink()
        log.info(
            "kube-apiserver CPU profile: %s",
            self.target.merged if merged else f"{len(chunks)} files {self.target.chunk(0).name}...",
        )
        return counts
