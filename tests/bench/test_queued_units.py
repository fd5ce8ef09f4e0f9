"""The Kueue scenario's pure parts (`python -m bench strategies --kueue`): the JobSet watch's recorder, the
queue figures, Kueue's requests and webhook calls counted apart, the fallback checks, the scenario, its
manifests and contenders, the command line and the report."""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any

import pytest

from bench import strategies
from bench.audit import KUEUE_CLIENT, client_of
from bench.contenders import BY_KEY, CONTENDERS, for_scenario, placement_problems
from bench.counters import AdmissionCalls, webhook_names
from bench.kube import stack_options
from bench.promtext import Samples
from bench.queued import (
    KUEUE_HEADLINE_METRICS,
    JobSetRecorder,
    JobSetTimes,
    fallback_problems,
    handovers,
    kueue_fields,
    max_admitted_at_once,
    queue_problems,
    queued_fields,
)
from bench.repeats import aggregate
from bench.report import markdown_table, scenario_label
from bench.scenarios import (
    KUEUE_LOCAL_QUEUE,
    KUEUE_QUICK_SCENARIOS,
    KUEUE_SCENARIOS,
    TOPOLOGY_KEY,
    Backlog,
    Scenario,
    queued_jobset_manifest,
    queued_jobset_names,
    scenarios_named,
)
from bench.strategies import (
    RunSettings,
    build_parser,
    chosen_scenarios,
    local_queue,
    local_queue_active,
    measured_jobsets,
    report_versions,
    run_scenario,
)
from devstack.controlplane import kueue
from devstack.controlplane.audit import Request
from devstack.controlplane.versions import pinned_versions
from placement.constants import (
    ELASTIC_FALLBACK_ANNOTATION,
    KUEUE_QUEUE_NAME_LABEL,
    RESIZE_DONE,
    RESIZE_LABEL,
    Strategy,
)
from tests.bench.bench_support import START, request, window_counts
from tests.support.builders import make_job, make_jobset

QUICK = KUEUE_QUICK_SCENARIOS[0]
FULL = KUEUE_SCENARIOS[0]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def recorder_fed(steps: list[tuple[float, str, dict[str, Any]]], names: list[str]) -> JobSetRecorder:
    clock = Clock()
    recorder = JobSetRecorder(names, clock)
    for at, kind, jobset in steps:
        clock.now = at
        recorder.observe(kind, jobset)
    return recorder


def queued(name: str) -> dict[str, Any]:
    return make_jobset(name).suspended().obj()


def admitted(name: str) -> dict[str, Any]:
    return make_jobset(name).suspended(False).obj()


def completed(name: str) -> dict[str, Any]:
    return make_jobset(name).suspended(False).condition("Completed").obj()


def test_the_jobset_watch_records_creation_admission_and_completion() -> None:
    recorder = recorder_fed(
        [
            (1.0, "ADDED", queued("a")),
            (1.5, "ADDED", queued("b")),
            (1.2, "ADDED", queued("other")),  # not one of the run's
            (2.0, "MODIFIED", admitted("a")),
            (3.0, "MODIFIED", admitted("a")),  # admitted once, at its first sighting unsuspended
            (9.0, "MODIFIED", completed("a")),
            (9.5, "MODIFIED", admitted("b")),
        ],
        ["a", "b"],
    )
    assert recorder.relative_to(1.0) == {
        "a": JobSetTimes(created=0.0, queued=True, admitted=1.0, completed=8.0),
        "b": JobSetTimes(created=0.5, queued=True, admitted=8.5),
    }
    assert not recorder.all_finished.is_set()  # b runs still
    recorder.observe("MODIFIED", completed("b"))
    assert recorder.all_finished.is_set()


def test_a_jobset_suspended_again_after_its_admission_counts_an_eviction_each_time() -> None:
    steps = [(0.0, "ADDED", queued("a"))]
    for round_ in range(2):
        steps += [(1.0 + 2 * round_, "MODIFIED", admitted("a")), (2.0 + 2 * round_, "MODIFIED", queued("a"))]
    recorder = recorder_fed(steps, ["a"])
    assert recorder.times["a"].evictions == 2
    assert recorder.times["a"].admitted == 1.0


def test_a_failed_jobset_is_finished_and_a_problem() -> None:
    failed = make_jobset("a").suspended(False).condition("Failed").obj()
    recorder = recorder_fed([(0.0, "ADDED", queued("a")), (4.0, "MODIFIED", failed)], ["a"])
    assert recorder.all_finished.is_set()
    assert queue_problems(recorder.times, ["a"]) == ["JobSet a failed"]


def times(admitted_at: float | None, finished: float | None, *, created: float = 0.0) -> JobSetTimes:
    return JobSetTimes(created=created, queued=True, admitted=admitted_at, completed=finished)


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        pytest.param({}, 0, id="nothing admitted"),
        pytest.param({"a": times(1, 5), "b": times(6, 9)}, 1, id="one after the other"),
        pytest.param({"a": times(1, 5), "b": times(5, 9)}, 1, id="the next admitted at the finish"),
        pytest.param({"a": times(1, 5), "b": times(4, 9)}, 2, id="overlapping"),
        pytest.param(
            {"a": times(1, None), "b": times(2, None), "c": times(None, None)}, 2, id="never finished"
        ),
    ],
)
def test_the_most_jobsets_admitted_at_once(entries: dict[str, JobSetTimes], expected: int) -> None:
    assert max_admitted_at_once(entries) == expected


def test_queue_figures_of_three_jobsets_admitted_one_at_a_time() -> None:
    entries = {
        "queued-0": times(0.5, 12.0),
        "queued-1": times(13.0, 25.0, created=0.1),
        "queued-2": times(26.5, 38.0, created=0.2),
    }
    whole = {"queued-0": 2.5, "queued-1": 14.0, "queued-2": 30.5}
    fields = queued_fields(entries, whole)
    assert fields == {
        "jobsets_admitted": 3,
        "jobsets_completed": 3,
        "jobsets_failed": 0,
        "seconds_to_all_complete": 38.0,
        "max_jobsets_admitted_at_once": 1,
        "kueue_evictions": 0,
        "admitted_to_all_running_seconds_p50": 2.0,
        "admitted_to_all_running_seconds_max": 4.0,
        "queue_wait_seconds_p50": 12.9,
        "queue_wait_seconds_max": 26.3,
        "handover_seconds_p50": 1.0,
        "handover_seconds_max": 1.5,
        "admission_order": ["queued-0", "queued-1", "queued-2"],
    }
    assert queue_problems(entries, list(entries)) == []


def test_not_all_complete_has_no_time_to_all_complete() -> None:
    fields = queued_fields({"a": times(1, 5), "b": times(6, None)}, {"a": 2.0})
    assert (fields["jobsets_completed"], fields["seconds_to_all_complete"]) == (1, None)
    assert fields["admitted_to_all_running_seconds_max"] == 1.0  # b's pods never all ran
    assert handovers({"a": times(1, 5), "b": times(6, None)}) == [1.0]


def test_what_says_kueue_did_not_queue_the_jobsets_one_at_a_time() -> None:
    entries = {
        "a": times(1, 5),
        "b": JobSetTimes(created=0.0, queued=False, admitted=0.0, completed=6.0),
    }
    assert queue_problems(entries, ["a", "b", "c"]) == [
        "JobSet c never seen",
        "JobSet b was not created suspended: Kueue did not queue it",
        "Kueue admitted 2 JobSets at once: the quota should hold one",
    ]


def kueue_request(verb: str, resource: str, *, namespace: str = "ns", at: float = 1.0) -> Request:
    resource, _, subresource = resource.partition("/")
    return Request(
        user=kueue.IDENTITY.username,
        user_agent="kueue/v0.19.2 (linux/amd64) kubernetes/abc",
        verb=verb,
        api_group="kueue.x-k8s.io",
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name="w",
        code=200,
        received=START + timedelta(seconds=at),
    )


def test_kueues_requests_are_counted_apart_by_its_serviceaccount() -> None:
    requests = [
        kueue_request("create", "workloads"),
        kueue_request("patch", "workloads/status"),
        kueue_request("patch", "workloads/status"),
        kueue_request("get", "clusterqueues", namespace=""),
        kueue_request("watch", "workloads"),  # background, as every watch
        request("jobset-controller", "create", "jobs"),
        request("job-controller", "create", "pods", code=201),
        request("job-controller", "create", "pods", code=201, namespace="other"),
    ]
    assert client_of(requests[0]) == KUEUE_CLIENT
    admission = AdmissionCalls(2, 0, 4, 0, 1, {}, kueue=7)
    fields = kueue_fields(window_counts(requests, admission=admission), "ns")
    assert fields == {
        "kueue_requests": 4,
        "kueue_requests_in_namespace": 3,
        "kueue_writes": 3,
        "kueue_requests_by_verb_resource": {
            "create workloads": 1,
            "get clusterqueues": 1,
            "patch workloads/status": 2,
        },
        "kueue_webhook_calls": 7,
        "api_requests_without_kueue": 3,
        "api_requests_in_namespace_without_kueue": 2,
        "api_writes_in_namespace_without_kueue": 2,
    }


def test_kueues_webhooks_are_counted_apart_from_both_projects() -> None:
    def configuration(name: str, webhooks: dict[str, str]) -> dict[str, Any]:
        hooks = [{"name": hook, "rules": [{"resources": [resource]}]} for hook, resource in webhooks.items()]
        return {"metadata": {"name": name}, "webhooks": hooks}

    configurations = [
        configuration("exclusive-placement", {"pods.exclusive-placement.io": "pods"}),
        configuration(
            "jobset-mutating-webhook-configuration", {"mpod.kb.io": "pods", "mjobset.kb.io": "jobsets"}
        ),
        configuration(
            "kueue-mutating-webhook-configuration",
            {"kueue-mjob.kb.io": "jobs", "kueue-mjobset.kb.io": "jobsets"},
        ),
    ]
    names = webhook_names(configurations, jobset_prefix="jobset-", kueue_prefix="kueue-")
    assert names.kueue == {"kueue-mjob.kb.io", "kueue-mjobset.kb.io"}
    assert names.project == {"pods.exclusive-placement.io"}
    assert names.jobset_other == {"mjobset.kb.io"}
    metric = "apiserver_admission_webhook_admission_duration_seconds_count"
    grown = Samples.parse(
        "".join(
            f'{metric}{{name="{name}",rejected="false"}} {n}\n'
            for name, n in (
                ("kueue-mjob.kb.io", 4),
                ("kueue-mjobset.kb.io", 2),
                ("mpod.kb.io", 8),
                ("mjobset.kb.io", 3),
            )
        )
    )
    calls = AdmissionCalls.of(grown, names)
    assert (calls.kueue, calls.project, calls.jobset_pods, calls.jobset_objects) == (6, 0, 8, 3)
    without = webhook_names(configurations, jobset_prefix="jobset-")
    assert "kueue-mjob.kb.io" in without.project  # without the prefix nothing is sorted apart


def fallen_back(name: str) -> dict[str, Any]:
    return make_job(name).annotation(ELASTIC_FALLBACK_ANNOTATION, "queued-by-kueue").obj()


def test_under_kueue_elastic_is_resized_and_no_job_falls_back() -> None:
    elastic = BY_KEY[Strategy.ELASTIC]
    resized = [make_job(name).label(RESIZE_LABEL, RESIZE_DONE).obj() for name in ("a", "b")]
    assert placement_problems(elastic, resized, [], expected_jobs=2, topology_key=TOPOLOGY_KEY) == []
    assert fallback_problems(resized) == []
    assert fallback_problems([make_job("d").obj()]) == []
    assert fallback_problems([resized[0], fallen_back("c")]) == [
        f"Job c: fell back ({ELASTIC_FALLBACK_ANNOTATION})"
    ]
    assert (
        len(placement_problems(elastic, [fallen_back("c")], [], expected_jobs=1, topology_key=TOPOLOGY_KEY))
        == 1
    )


def test_the_kueue_scenarios_quota_fits_one_jobset_and_the_pools_fit_it() -> None:
    assert (FULL.jobsets, FULL.jobs, FULL.pods_per_job, FULL.pools) == (3, 4, 4, 4)
    assert FULL.kueue_gpu_quota == 16
    assert QUICK.kueue_gpu_quota == QUICK.jobset_pods == 8
    assert QUICK.total_pods < FULL.total_pods
    options = stack_options(FULL, ["bench-x-jobset-r1"])
    assert (options.kueue, options.kueue_gpu_quota, options.exempt_namespaces) == (
        True,
        16,
        ("bench-x-jobset-r1",),
    )
    assert not stack_options(scenarios_named(["4x8"])[0], []).kueue
    assert scenarios_named([QUICK.name, FULL.name]) == (QUICK, FULL)
    assert measured_jobsets(FULL) == queued_jobset_names(FULL) == ["queued-0", "queued-1", "queued-2"]
    assert (FULL.fields()["kueue"], FULL.fields()["kueue_gpu_quota"]) == (True, 16)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pod_run_seconds": None}, "admits the next JobSet only once pods finish"),
        ({"pools": 3}, "one queued JobSet must fit the pools"),
        ({"gang_deadline_seconds": 60.0}, "has no deadline"),
        ({"backlog": Backlog(jobs=1, pods_per_job=1)}, "neither a backlog"),
    ],
)
def test_kueue_scenario_validation(kwargs: dict[str, Any], message: str) -> None:
    shape: dict[str, Any] = {"jobs": 4, "pods_per_job": 4, "pools": 4, "pod_run_seconds": 5.0, "jobsets": 3}
    with pytest.raises(ValueError, match=message):
        Scenario("bad", **{**shape, **kwargs}, kueue=True)


def test_a_queued_jobset_names_the_runs_local_queue() -> None:
    manifest = queued_jobset_manifest(
        FULL, Strategy.ELASTIC, name="queued-1", namespace="ns", pod_annotations={"k": "v"}
    )
    assert manifest["metadata"]["labels"] == {KUEUE_QUEUE_NAME_LABEL: KUEUE_LOCAL_QUEUE}
    template = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert template["metadata"]["annotations"]["k"] == "v"
    assert manifest["spec"]["replicatedJobs"][0]["replicas"] == 4
    queue = local_queue("ns")
    assert (queue["metadata"], queue["spec"]) == (
        {"name": KUEUE_LOCAL_QUEUE, "namespace": "ns"},
        {"clusterQueue": kueue.CLUSTER_QUEUE},
    )
    assert not local_queue_active(queue)
    assert local_queue_active({**queue, "status": {"conditions": [{"type": "Active", "status": "True"}]}})


def test_a_kueue_scenario_runs_jobset_gate_and_elastic() -> None:
    assert [c.key for c in for_scenario(CONTENDERS, gang=False, kueue=True)] == ["jobset", "gate", "elastic"]


def parsed(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_the_report_names_kueues_version_only_where_it_ran() -> None:
    pinned = pinned_versions()
    assert report_versions(KUEUE_QUICK_SCENARIOS) == {**pinned.as_dict(), "kueue": pinned.kueue}
    assert "kueue" not in report_versions(scenarios_named(["4x8"]))


def test_kueue_on_the_command_line_runs_the_kueue_scenario_alone() -> None:
    assert chosen_scenarios(parsed("--kueue")) == KUEUE_SCENARIOS
    assert chosen_scenarios(parsed("--kueue", "--quick")) == KUEUE_QUICK_SCENARIOS
    assert all(not s.kueue for s in chosen_scenarios(parsed("--quick")))


def run_of(kueue_requests: int, seconds: float) -> dict[str, Any]:
    return {
        "api_requests_in_namespace_without_kueue": 100,
        "api_writes_in_namespace_without_kueue": 60,
        "all_webhook_calls": 40,
        "apiserver_cpu_seconds": 3.0,
        "wasted_requests": 0,
        "seconds_to_all_complete": seconds,
        "admitted_to_all_running_seconds_p50": 1.0,
        "kueue_requests": kueue_requests,
        "kueue_webhook_calls": 9,
        "jobsets_completed": 2,
        "max_jobsets_admitted_at_once": 1,
        "exclusive_violations": 0,
    }


def test_a_kueue_scenarios_ratios_leave_kueues_requests_out_and_show_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = {
        "jobset": [run_of(50, 30.0), run_of(50, 32.0)],
        "gate": [run_of(50, 30.0), run_of(50, 30.0)],
        "elastic": [run_of(55, 27.0), run_of(45, 32.0)],
    }
    monkeypatch.setattr(strategies, "_run_contenders", lambda scenario, group, settings: runs)
    record = run_scenario(QUICK, CONTENDERS, RunSettings(60.0, repeat=2))
    ratios = record["elastic_vs_jobset"]
    assert set(ratios) == {key for key, _ in KUEUE_HEADLINE_METRICS}
    assert "api_requests_in_namespace" not in ratios  # Kueue's requests in it
    assert ratios["kueue_requests"] == {"median": 1.0, "min": 0.9, "max": 1.1, "pairs": 2, "verdict": "tie"}
    assert ratios["seconds_to_all_complete"]["verdict"] == "tie"
    assert record["elastic_vs_gate"]["api_requests_in_namespace_without_kueue"]["median"] == 1.0
    table = markdown_table({"repeat": 2, "versions": {"kueue": "v0.19.2"}, "scenarios": [record]})
    assert "Queued by Kueue:" in table
    assert "Under Kueue `elastic` is elastic" in table
    assert "Under Kueue, elastic / jobset" in table
    assert "Kueue v0.19.2" in table
    label = scenario_label(record)
    assert label == "2 JobSets of 2x4 on 2 pools queued by Kueue (quota 8 GPUs: one JobSet)"
    assert f"| {label} | `elastic` | 2 | 29.50 (27.00-32.00) |" in table


def test_the_kueue_scenario_is_not_in_the_other_ratio_tables() -> None:
    record = {**QUICK.fields(), "results": {"jobset": aggregate([run_of(1, 1.0)])}}
    record["elastic_vs_jobset"] = {
        "kueue_requests": {"median": 1.0, "min": 1.0, "max": 1.0, "pairs": 1, "verdict": "one run"}
    }
    table = markdown_table({"repeat": 1, "scenarios": [record]})
    assert "Under Kueue, elastic / jobset" in table
    assert "\nelastic / jobset" not in table
