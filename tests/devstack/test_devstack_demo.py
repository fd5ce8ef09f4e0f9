"""`make demo` / `make run` logic end to end, scaled down: real kubesim, webhook and resizer processes."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devstack.__main__ import main as devstack_main
from devstack.commands import KubesimFlags
from devstack.demo import apply_and_follow
from devstack.ports import port_is_free
from devstack.scenario import PlacementError, load_manifests
from devstack.stack import Stack, StackOptions
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "jobset-exclusive.yaml"
SMALL = KubesimFlags(nodes=8, pools=4, gpus_per_node=8, time_scale=0.05)
"""4 pools x 2 nodes x 8 GPUs = 16 GPUs per pool."""


def scaled_example(replicas: int = 3, pods: int = 4, gpus: int = 4) -> list[dict[str, Any]]:
    """The shipped example, scaled to the small cluster: `replicas` Jobs of `pods` x `gpus` GPUs."""
    (jobset,) = load_manifests(EXAMPLE)
    rjob = jobset["spec"]["replicatedJobs"][0]
    rjob["replicas"] = replicas
    rjob["template"]["spec"]["completions"] = rjob["template"]["spec"]["parallelism"] = pods
    resources = rjob["template"]["spec"]["template"]["spec"]["containers"][0]["resources"]
    resources["requests"]["nvidia.com/gpu"] = resources["limits"]["nvidia.com/gpu"] = str(gpus)
    return [jobset]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    options = StackOptions(cluster=SMALL, workdir=tmp_path_factory.mktemp("stack"), startup_timeout=90)
    with Stack(options) as running:
        yield running


def test_demo_places_every_job_whole_in_its_own_pool(stack: Stack) -> None:
    lines: list[str] = []
    observation = apply_and_follow(stack, scaled_example(), namespace="demo", timeout=90, echo=lines.append)

    assert len(observation.statuses) == 3
    assert all(s.state == "running" and s.pods_running == s.target == 4 for s in observation.statuses)
    assert all(len(s.domains) == 1 for s in observation.statuses)
    assert len({s.domains[0] for s in observation.statuses}) == 3
    assert all(s.resized for s in observation.statuses)  # elastic: every Job went back to full size
    assert observation.problems == []
    assert stack.client.stats()["pods"]["create_rejected"] == 0
    table = observation.table.splitlines()
    assert table[0].split()[:3] == ["Job", "node", "pool"]
    assert len(table) == 2 + 3
    assert lines[0] == "created JobSet demo/training"
    assert any("3 running" in line for line in lines)


def test_unplaceable_jobs_fail_with_the_schedulers_reason(stack: Stack) -> None:
    too_big = scaled_example(replicas=2, pods=2, gpus=16)  # 16 GPUs per pod: no node has more than 8
    with pytest.raises(PlacementError, match=r"not every Job was placed within 3s") as err:
        apply_and_follow(stack, too_big, namespace="too-big", timeout=3, echo=lambda _: None)
    assert "2 pods: Unschedulable: 0/8 nodes are available: 8 Insufficient nvidia.com/gpu." in str(err.value)
    assert "--gpus-per-node 16" in str(err.value)


def test_demo_cli_exits_zero_with_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "jobset.yaml"
    manifest.write_text(yaml.safe_dump_all(scaled_example(replicas=2)))
    argv = ["demo", "-f", str(manifest), "--nodes", "8", "--pools", "4", "--workdir", str(tmp_path / "w")]
    assert devstack_main(argv) == 0
    out = capsys.readouterr().out
    assert "every Job placed, each in its own node pool (2 Jobs)" in out
    assert re.search(r"default/training-workers-0\s+pool-\d+\s+4/4", out)


def test_run_says_once_why_the_example_stalls_on_pools_too_small_for_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The shipped example (4 Jobs x 8 pods x 4 GPUs) on 4 pools of 2 nodes x 8 GPUs: half of each Job fits.
    argv = ["run", "--nodes", "8", "--pools", "4", "--time-scale", "0.05", "--workdir", str(tmp_path / "w")]
    assert devstack_main([*argv, "--stall-seconds", "0.5", "--timeout", "6"]) == 1
    out, err = capsys.readouterr()
    reports = [block.split("] ", 1) for block in out.split("\n[") if "] no progress for " in block]
    pictures = [re.sub(r"no progress for \d+s", "", report) for _, report in reports]
    last_at, last = float(reports[-1][0].strip(" s")), reports[-1][1]
    assert "(4 Jobs: 4 resized)" in last, out
    assert pictures.count(pictures[-1]) == 1, out  # said once ...
    assert last_at < 6 - 1.5, (
        out
    )  # ... though rechecked every 0.5 s for at least 1.5 s after, until the timeout
    assert "\n  16 pods: Unschedulable: 0/8 nodes are available: 2 Insufficient nvidia.com/gpu, " in last
    hint = last.split("\n  hint: ")[1]
    assert hint.startswith("4 Jobs (default/training-workers-0, ...) need 8 pods x 4 nvidia.com/gpu")
    assert "--nodes 16 (with --pools 4: 4 nodes per pool)" in hint
    assert "not every Job was placed within 6s" in err
    assert "hint: 4 Jobs" in err  # the timeout says the same, from the same diagnosis


def test_demo_cli_rejects_a_bad_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text("kind: JobSet\n")
    assert devstack_main(["demo", "-f", str(manifest)]) == 2
    assert "needs apiVersion" in capsys.readouterr().err


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@contextlib.contextmanager
def sigint_disposition(handler: Any) -> Iterator[None]:
    """What a child started meanwhile inherits: SIG_IGN survives exec, a Python handler becomes SIG_DFL."""
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize(
    "inherited_sigint",
    [signal.default_int_handler, signal.SIG_IGN],
    ids=["sigint-default", "sigint-ignored-as-in-a-background-job"],
)
def test_run_serves_until_ctrl_c_then_leaves_no_process_or_port_behind(
    tmp_path: Path, inherited_sigint: Any
) -> None:
    # `make test &` (or any background job of a non-interactive shell) starts pytest with SIGINT ignored, and
    # a child inherits that: devstack must stop on SIGINT either way, not only when pytest ran in a terminal.
    manifest = tmp_path / "jobset.yaml"
    manifest.write_text(yaml.safe_dump_all(scaled_example(replicas=2)))
    argv = [
        sys.executable,
        "-m",
        "devstack",
        "run",
        "-f",
        str(manifest),
        "--nodes",
        "8",
        "--pools",
        "4",
        "--time-scale",
        "0.05",
        "--workdir",
        str(tmp_path / "w"),
    ]
    log = tmp_path / "run.log"
    with log.open("w") as out, sigint_disposition(inherited_sigint):
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parents[2]
        )
    try:

        def serving() -> bool:
            assert proc.poll() is None, log.read_text()  # exited: fail at once, with its output
            return "Ctrl-C stops everything" in log.read_text()

        eventually(serving, lambda: f"make run serving; its output:\n{log.read_text()}", 150, interval=0.2)
        children = _descendants(proc.pid)
        assert len(children) >= 3  # kubesim, webhook, resizer
        port = int(re.search(r"kubesim http://127\.0\.0\.1:(\d+)", log.read_text())[1])  # type: ignore[index]
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(60) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "stopped: every process terminated" in log.read_text()
    assert [pid for pid in children if _alive(pid)] == []
    assert port_is_free(port)
