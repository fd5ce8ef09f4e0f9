"""What `kubectl exclusive-placement` prints: the JSON document (a stable interface), the tables, and
`explain`'s one screen, from objects as the API server shows them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubectl_plugin.explain import explain_job, explain_jobset, explain_pod
from kubectl_plugin.render import render_json, render_table, status_document
from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    ALL_OR_NOTHING_GATE,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_NAME_LABEL,
    RESIZE_DONE,
    STRATEGY_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)
from placement.status import Snapshot, WaitReason, placement_status
from tests.placement.placement_pods import NS, job
from tests.placement.placement_status_objects import (
    POOL,
    UNSCHEDULABLE,
    Obj,
    exclusive_job,
    exclusive_pod,
    followers,
    pools,
)

DOMAIN_KEYS = {"topology_key", "domain", "schedulable", "nodes", "holders"}
HOLDER_KEYS = {"namespace", "jobset", "job", "priority", "since"}
WAITING_KEYS = {"namespace", "jobset", "job", "reason", "message"}


def contended() -> Snapshot:
    """Two pools: `a` (JobSet train) placed in pool-0, `b` (JobSet eval) waiting for its leader, pool-1
    cordoned."""
    pods = [
        exclusive_pod("a", 0, node_name="node-0", jobset="train"),
        *followers("a", 3, node_name="node-0", jobset="train"),
        exclusive_pod("b", 0, verdict=UNSCHEDULABLE, jobset="eval"),
    ]
    jobs = [exclusive_job("a", resize=RESIZE_DONE, jobset="train"), exclusive_job("b", jobset="eval")]
    return Snapshot(pools(2, cordoned=(1,)), pods, jobs)


def test_the_json_document_has_the_documented_keys_and_values() -> None:
    document = json.loads(render_json(*placement_status(contended(), NS)))
    assert set(document) == {"domains", "waiting"}
    assert all(set(domain) == DOMAIN_KEYS for domain in document["domains"])
    assert all(set(holder) == HOLDER_KEYS for d in document["domains"] for holder in d["holders"])
    assert all(set(waiting) == WAITING_KEYS for waiting in document["waiting"])
    assert document["domains"] == [
        {
            "topology_key": POOL,
            "domain": "pool-0",
            "schedulable": True,
            "nodes": 1,
            "holders": [
                {
                    "namespace": NS,
                    "jobset": "train",
                    "job": "a",
                    "priority": 0,
                    "since": "2026-01-01T00:00:10Z",
                }
            ],
        },
        {"topology_key": POOL, "domain": "pool-1", "schedulable": False, "nodes": 1, "holders": []},
    ]
    (waiting,) = document["waiting"]
    assert (waiting["namespace"], waiting["jobset"], waiting["job"]) == (NS, "eval", "b")
    assert waiting["reason"] == "leader-unschedulable"
    assert UNSCHEDULABLE in waiting["message"]


def test_every_reason_is_a_documented_value() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "kubectl-plugin.md").read_text()
    assert [reason.value for reason in WaitReason if f"| `{reason.value}` |" not in text] == []


def test_absent_jobset_and_time_are_null_in_json() -> None:
    pods = [exclusive_pod("solo", 0, node_name="node-0", scheduled_at="")]
    pods[0]["status"]["conditions"] = []
    snapshot = Snapshot(pools(1), pods, [exclusive_job("solo", resize=None, size=1)])
    document = status_document(*placement_status(snapshot, NS))
    assert document["domains"][0]["holders"] == [
        {"namespace": NS, "jobset": None, "job": "solo", "priority": 0, "since": None}
    ]
    assert document["waiting"] == []


def test_the_compact_document_is_one_line() -> None:
    assert "\n" not in render_json(*placement_status(contended(), NS), compact=True)


def test_the_table_lists_domains_then_waiting_jobs() -> None:
    text = render_table(
        *placement_status(contended(), NS), scope=f"in namespace {NS}", all_namespaces=False, wide=False
    )
    domains, waiting = text.split("\n\n")
    assert domains.splitlines()[0].split() == ["TOPOLOGY", "KEY", "DOMAIN", "STATE", "HELD", "BY"]
    assert domains.splitlines()[1].split() == [POOL, "pool-0", "held", f"{NS}/a"]
    assert domains.splitlines()[2].split() == [POOL, "pool-1", "unschedulable", "<none>"]
    assert waiting.splitlines()[0].split() == ["JOBSET", "JOB", "REASON", "MESSAGE"]
    assert waiting.splitlines()[1].split()[:3] == ["eval", "b", "leader-unschedulable"]


def test_wide_and_all_namespaces_add_their_columns() -> None:
    text = render_table(
        *placement_status(contended(), None), scope="in any namespace", all_namespaces=True, wide=True
    )
    domains, waiting = text.split("\n\n")
    assert domains.splitlines()[0].split()[-4:] == ["JOBSET", "PRIORITY", "SINCE", "NODES"]
    assert domains.splitlines()[1].split()[-4:] == ["train", "0", "2026-01-01T00:00:10Z", "1"]
    assert waiting.splitlines()[1].split()[:2] == [NS, "eval"]


def test_an_empty_scope_says_so() -> None:
    assert render_table([], [], scope="in namespace x", all_namespaces=False, wide=False) == (
        "No exclusive Jobs or topology domains found in namespace x."
    )
    snapshot = Snapshot(pools(1), [exclusive_pod("a", 0, node_name="node-0")], [])
    text = render_table(
        *placement_status(snapshot, NS), scope=f"in namespace {NS}", all_namespaces=False, wide=False
    )
    assert text.endswith(f"No exclusive Job in namespace {NS} is waiting: every one is placed.")


# --- explain -----------------------------------------------------------------------------------------------


def test_explain_job_shows_the_steps_the_scheduler_and_what_would_unblock_it() -> None:
    snapshot = contended()
    waiting_job = snapshot.jobs[1]
    event = {
        "involvedObject": {"kind": "Pod", "name": "b-0-xyz"},
        "type": "Warning",
        "reason": "FailedScheduling",
        "message": UNSCHEDULABLE,
        "count": 3,
        "lastTimestamp": "2026-01-01T00:01:00Z",
    }
    routine = {**event, "type": "Normal", "reason": "Scheduled", "message": "routine"}
    text = explain_job(snapshot, waiting_job, [event, routine])
    lines = text.splitlines()
    assert lines[0] == f"Job {NS}/b (JobSet eval)"
    assert f"{POOL} (2 domains: 1 held, 0 free, 1 unschedulable)" in lines[1]
    assert "  [x] leader created   b-0-xyz" in lines
    assert any(line.startswith("  [ ] leader bound") for line in lines)
    assert "Waiting for:     leader-unschedulable" in lines
    assert f"  leader pod b-0-xyz: Unschedulable: {UNSCHEDULABLE}" in lines
    assert (
        f"  - a {POOL} domain freeing up: held are pool-0 by {NS}/a; one frees when its Job completes or is "
        "deleted" in lines
    )
    assert "  - uncordoning pool-1 (kubectl uncordon)" in lines
    assert f"  Warning FailedScheduling pod/b-0-xyz (x3): {UNSCHEDULABLE}" in lines
    assert "routine" not in text


def test_explain_job_names_pods_the_webhook_never_admitted() -> None:
    snapshot = contended()
    stray = exclusive_pod("b", 1)
    stray["metadata"]["labels"] = {}
    text = explain_job(snapshot, snapshot.jobs[1], [], [stray])
    assert "1 pods without the exclusive-placement.io/job-key label (e.g. b-1-xyz)" in text


def test_explain_job_of_a_placed_job_says_where() -> None:
    snapshot = contended()
    text = explain_job(snapshot, snapshot.jobs[0], [])
    assert f"Placed:          every pod is bound in {POOL}=pool-0" in text.splitlines()


@pytest.mark.parametrize(
    "annotations",
    [{}, {"alpha.jobset.sigs.k8s.io/node-selector": "true", JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: POOL}],
)
def test_explain_a_job_that_is_not_exclusive(annotations: dict[str, str]) -> None:
    plain = job(name="plain", annotations=annotations)
    assert "does not ask for exclusive placement" in explain_job(contended(), plain, [])


def jobset(annotations: dict[str, str], replicas: int = 2) -> Obj:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "train", "namespace": NS, "annotations": annotations},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": replicas, "template": {"spec": {}}}]},
    }


def contended_train() -> Snapshot:
    """`contended()` with both Jobs children of JobSet train, and a third pool so that two schedulable
    pools hold its two Jobs (not a capacity problem)."""
    snapshot = contended()
    for child in snapshot.jobs:
        child["metadata"]["labels"][JOBSET_NAME_LABEL] = "train"
    return Snapshot(pools(3, cordoned=(1,)), snapshot.pods, snapshot.jobs)


def test_explain_jobset_lists_its_jobs_and_the_first_that_waits() -> None:
    text = explain_jobset(contended_train(), jobset({JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: POOL}), [])
    lines = text.splitlines()
    assert lines[0] == f"JobSet {NS}/train"
    assert f"Exclusive Jobs:  2 of 2 created, on {POOL}" in lines
    assert "All-or-nothing:  asked: the webhook's default; its Jobs: none in a gang" in lines
    assert [line.split()[:3] for line in lines if line.startswith("  a ") or line.startswith("  b ")] == [
        ["a", "placed", "pool-0"],
        ["b", "leader-unschedulable", "<none>"],
    ]
    assert "Next:            b: leader-unschedulable" in lines


def test_explain_jobset_short_of_jobs_and_asking_all_or_nothing() -> None:
    annotations = {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: POOL, ALL_OR_NOTHING_ANNOTATION: "true"}
    text = explain_jobset(Snapshot(pools(2), [], []), jobset(annotations, replicas=3), [])
    assert "Exclusive Jobs:  0 of 3 created" in text
    assert "All-or-nothing:  asked: yes; its Jobs: none created yet" in text
    assert "JobSet's controller creates the other 3 Jobs" in text


def test_explain_jobset_shows_what_its_jobs_got_next_to_what_it_asks() -> None:
    annotations = {
        JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: POOL,
        ALL_OR_NOTHING_ANNOTATION: "true",
        STRATEGY_ANNOTATION: "gate",
    }
    snapshot = contended_train()
    snapshot.jobs[1]["spec"]["template"]["metadata"].setdefault("annotations", {})[STRATEGY_ANNOTATION] = (
        "gate"
    )
    text = explain_jobset(snapshot, jobset(annotations), [])
    assert (
        "All-or-nothing:  asked: yes; its Jobs: none in a gang (admitted without it: the webhook could not "
        "read the JobSet, or was not called)"
    ) in text
    assert (
        "Strategy:        asked: gate (the JobSet's annotation: its Jobs' default); "
        "its Jobs: elastic x1, gate x1" in text
    )
    assert "admission warning" not in text


def test_explain_jobset_counts_only_its_own_exclusive_jobs() -> None:
    """Jobs of another JobSet, or of no exclusive placement, are neither listed nor counted as created."""
    base = contended()  # a of JobSet train, b of JobSet eval
    driver = job(name="driver", labels={JOBSET_NAME_LABEL: "train"})
    snapshot = Snapshot(base.nodes, base.pods, [*base.jobs, driver])
    text = explain_jobset(snapshot, jobset({JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: POOL}), [])
    assert "Exclusive Jobs:  1 of 2 created" in text
    assert "Next:            JobSet's controller creates the other 1 Jobs (events say why not)" in text
    assert not [line for line in text.splitlines() if line.startswith(("  b ", "  driver "))]


def test_explain_pod_says_its_role_and_explains_its_job() -> None:
    snapshot = contended()
    follower = snapshot.pods[1]
    text = explain_pod(snapshot, follower, snapshot.jobs[0], [])
    assert text.splitlines()[0] == f"Pod {NS}/a-1-abcde: follower (completion index 1) of Job {NS}/a"
    assert f"Node:            node-0 ({POOL}=pool-0)" in text
    assert f"Job {NS}/a (JobSet train)" in text


def test_explain_a_pod_without_topology() -> None:
    bare = exclusive_pod("x", 0)
    bare["metadata"]["annotations"] = {TOPOLOGY_ANNOTATION: ""}
    assert "asks for no exclusive placement" in explain_pod(contended(), bare, None, [])


def test_a_non_indexed_job_waiting_for_a_domain_is_told_about_domains_not_a_leaders_domain() -> None:
    pods = [exclusive_pod("a", 0, node_name="node-0"), exclusive_pod("sweep", None, verdict=UNSCHEDULABLE)]
    sweep = exclusive_job("sweep", resize=None, mode=None, size=1)
    snapshot = Snapshot(pools(1), pods, [exclusive_job("a", resize=RESIZE_DONE, size=1), sweep])
    text = explain_job(snapshot, sweep, [])
    assert "Waiting for:     pods-unschedulable" in text
    assert "follower" not in text
    assert f"  - a {POOL} domain freeing up: held are pool-0 by {NS}/a" in text
    assert "pinned next to their leader" not in text


def test_a_placed_non_indexed_job_names_the_domain_its_pods_share() -> None:
    pods = [exclusive_pod("sweep", None, node_name="node-1") for _ in range(2)]
    sweep = exclusive_job("sweep", resize=None, mode=None, size=2)
    text = explain_job(Snapshot(pools(2), pods, [sweep]), sweep, [])
    assert f"Placed:          every pod is bound in {POOL}=pool-1" in text
    assert "=?" not in text


def test_explain_a_job_of_a_stepped_over_jobset() -> None:
    """The resizer stepped the JobSet over (its Event): explain names the reason and what frees domains."""
    pods = [
        exclusive_pod("other", 0, node_name="node-0"),
        *(exclusive_pod(n, 0, jobset="big", gang=2, gates=(ALL_OR_NOTHING_GATE,)) for n in ("a", "b")),
    ]
    jobs = [exclusive_job(n, jobset="big", gang=2) for n in ("a", "b")]
    snapshot = Snapshot(pools(2), pods, jobs, stepped_over=frozenset({(NS, "big")}))
    text = explain_job(snapshot, jobs[0], [])
    assert WaitReason.ALL_OR_NOTHING_STEPPED_OVER.value in text
    assert "stepped over" in text
    assert ALL_OR_NOTHING_ANNOTATION in text  # the hint to take domains as they free up


def test_explain_a_gang_job_waiting_for_the_other_leaders_points_at_its_jobset_not_the_resizer() -> None:
    pods = [
        exclusive_pod("a", 0, node_name="node-0", jobset="big", gang=2),
        exclusive_pod("b", 0, verdict=UNSCHEDULABLE, jobset="big", gang=2),
    ]
    jobs = [exclusive_job(n, jobset="big", gang=2) for n in ("a", "b")]
    text = explain_job(Snapshot(pools(2), pods, jobs), jobs[0], [])
    lines = text.splitlines()
    assert f"Waiting for:     {WaitReason.ALL_OR_NOTHING_GANG_INCOMPLETE.value}" in lines
    assert (
        f"  - the other Jobs of JobSet {NS}/big getting their leaders bound: kubectl exclusive-placement "
        f"explain jobset/big -n {NS} shows what each of them waits for"
    ) in lines
    assert any("--all-or-nothing-timeout-seconds" in line for line in lines)
    assert "Lease" not in text
