"""`bench strategies --profile-apiserver`: kube-apiserver's CPU profile recorded over a measured window as
consecutive profiles, against a fake API server (httpx's MockTransport); the kube tier's contract test of
`bench strategies --quick` reads real ones with `go tool pprof`."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from bench.apiserver_profile import (
    CHUNK_SECONDS,
    PROFILE_AGENT,
    PROFILE_PATH,
    ProfiledCounters,
    ProfileError,
    ProfileTarget,
    merge_profiles,
    record_profile,
)
from bench.audit import RequestCounts, Window
from bench.counters import AdmissionCalls, SchedulerCounts, WindowCounts


class FakeProfiler:
    """kube-apiserver's `/debug/pprof/profile`: answers `profile-<n>` at once; `served` is set once it has
    answered `announce_after` of them."""

    def __init__(self, announce_after: int = 3, status: int = 200) -> None:
        self.requests: list[httpx.Request] = []
        self.served = asyncio.Event()
        self.announce_after = announce_after
        self.status = status

    async def answer(self, request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0)  # yield, as a real answer would: the recorder must see `stop` between chunks
        self.requests.append(request)
        if len(self.requests) >= self.announce_after:
            self.served.set()
        if self.status != 200:
            return httpx.Response(self.status, text="cpu profiling already in use")
        return httpx.Response(200, content=f"profile-{len(self.requests)}".encode())

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self.answer), base_url="https://apiserver")


def test_profiles_are_recorded_one_after_the_other_until_stopped(tmp_path: Path) -> None:
    profiler = FakeProfiler()
    target = ProfileTarget(tmp_path / "profiles", "4x8-elastic-1")

    async def record() -> list[Path]:
        stop = asyncio.Event()
        async with profiler.client() as http:
            recording = asyncio.create_task(record_profile(http, target, stop))
            await profiler.served.wait()
            stop.set()
            return await recording

    chunks = asyncio.run(record())
    assert len(chunks) == len(profiler.requests) >= 3
    assert [c.name for c in chunks] == [f"4x8-elastic-1.{i:03d}.pb.gz" for i in range(len(chunks))]
    assert [c.read_bytes() for c in chunks] == [f"profile-{i + 1}".encode() for i in range(len(chunks))]
    for request in profiler.requests:
        assert request.url.path == PROFILE_PATH
        assert request.url.params["seconds"] == str(CHUNK_SECONDS)
        assert request.headers["User-Agent"] == PROFILE_AGENT


def test_a_refused_profile_is_an_error_naming_the_answer(tmp_path: Path) -> None:
    profiler = FakeProfiler(status=500)

    async def record() -> list[Path]:
        async with profiler.client() as http:
            return await record_profile(http, ProfileTarget(tmp_path, "x"), asyncio.Event())

    with pytest.raises(ProfileError, match=r"500.*cpu profiling already in use"):
        asyncio.run(record())


def empty_counts() -> WindowCounts:
    now = datetime.now(UTC)
    return WindowCounts(
        window=Window(now, now),
        requests=RequestCounts(),
        events={},
        admission=AdmissionCalls(0, 0, 0, 0, 0, {}),
        scheduler=SchedulerCounts(0, 0, 0, 0, {}),
        apiserver_cpu_seconds=0.0,
        admission_policy_seconds={},
    )


class FakeCounters:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.counts = empty_counts()

    async def reset(self, http: httpx.AsyncClient) -> None:
        self.calls.append("reset")

    async def snapshot(self, http: httpx.AsyncClient, namespaces: Sequence[str]) -> WindowCounts:
        self.calls.append(f"snapshot {','.join(namespaces)}")
        return self.counts


def test_the_window_is_profiled_from_its_opening_to_its_closing_and_merged_in_place_of_its_chunks(
    tmp_path: Path,
) -> None:
    profiler, counters = FakeProfiler(), FakeCounters()
    merged: list[tuple[list[str], Path]] = []

    def merge(chunks: list[Path], into: Path) -> bool:
        merged.append(([c.read_text() for c in chunks], into))
        return True

    target = ProfileTarget(tmp_path, "32x32-jobset-2")
    profiled = ProfiledCounters(counters, target, merge)

    async def window() -> WindowCounts:
        async with profiler.client() as http:
            await profiled.reset(http)
            await profiler.served.wait()
            return await profiled.snapshot(http, ["ns"])

    assert asyncio.run(window()) is counters.counts
    assert counters.calls == ["reset", "snapshot ns"]
    [(chunks, into)] = merged
    assert chunks == [f"profile-{i + 1}" for i in range(len(profiler.requests))]
    assert into == tmp_path / "32x32-jobset-2.pb.gz"
    assert list(tmp_path.iterdir()) == []  # merged: the chunks are gone (the fake wrote no merged file)


def test_a_snapshot_without_a_reset_is_an_error(tmp_path: Path) -> None:
    profiled = ProfiledCounters(FakeCounters(), ProfileTarget(tmp_path, "x"), lambda chunks, into: True)

    async def snapshot() -> WindowCounts:
        async with FakeProfiler().client() as http:
            return await profiled.snapshot(http, [])

    with pytest.raises(ProfileError, match="before reset"):
        asyncio.run(snapshot())


def test_without_a_go_toolchain_the_chunks_stay_unmerged(tmp_path: Path) -> None:
    chunk = tmp_path / "x.000.pb.gz"
    chunk.write_bytes(b"profile")
    assert merge_profiles([chunk], tmp_path / "x.pb.gz", which=lambda name: None) is False
    assert not (tmp_path / "x.pb.gz").exists()


def test_a_profile_go_cannot_read_is_an_error_and_leaves_no_merged_file(tmp_path: Path) -> None:
    chunk = tmp_path / "x.000.pb.gz"
    chunk.write_bytes(b"not a profile")
    with pytest.raises(ProfileError, match="go tool pprof -proto failed"):
        merge_profiles([chunk], tmp_path / "x.pb.gz")
    assert not (tmp_path / "x.pb.gz").exists()
