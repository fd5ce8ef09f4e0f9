"""placement.admission: every strategy x leader/follower x leader state, patches applied and re-run."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from placement.admission import (
    DEFAULT_JOB_CONTROLLER_USERNAMES,
    Creator,
    LeaderState,
    LeaderStatus,
    PodPlan,
    Skip,
    admit_pod,
    leader_state,
    mutate_job,
    mutate_pod,
    mutation_needs_leader,
    plan_pod,
    validate_pod,
    validation_needs_leader,
)
from placement.constants import (
    DEFAULT_FOLLOWER_SHARDS,
    ELASTIC_FALLBACK_ANNOTATION,
    JOB_KEY_LABEL,
    JOBSET_JOB_KEY_LABEL,
    JOBSET_NODE_SELECTOR_ANNOTATION,
    LEADER_SCHEDULED_GATE,
    PIN_SHARD_LABEL,
    PRIORITY_LABEL,
    RESIZE_LABEL,
    ROLE_LABEL,
    STRATEGIES,
    STRATEGY_ANNOTATION,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
    TOPOLOGY_ANNOTATION,
    Strategy,
)
from placement.jobset import JobSetStartup
from placement.objects import JobRef, job_key, pin_shard
from placement.patch import apply
from tests.placement.placement_pods import JOB, NS, UID, ZONE, job, node, pod

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
BOUND = LeaderState(LeaderStatus.BOUND, "leader-0", "node-1", "zone-a")


def _without_job(p: dict[str, Any]) -> dict[str, Any]:
    p["metadata"].pop("ownerReferences")
    p["metadata"]["labels"] = {}
    return p


def _node_selector_mode(p: dict[str, Any]) -> dict[str, Any]:
    p["metadata"]["annotations"][JOBSET_NODE_SELECTOR_ANNOTATION] = "true"
    p["spec"]["nodeSelector"] = {"alpha.jobset.sigs.k8s.io/namespaced-job": f"{NS}_{JOB}"}
    return p


def _plan(p: dict[str, Any], default: Strategy = Strategy.ELASTIC) -> PodPlan:
    plan = plan_pod(p, NS, default)
    assert isinstance(plan, PodPlan)
    return plan


# --- Jobs ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", [Strategy.GATE, Strategy.SCHEDULING_GATE, Strategy.AFFINITY])
def test_non_elastic_jobs_are_untouched(strategy: Strategy) -> None:
    annotations = {"alpha.jobset.sigs.k8s.io/exclusive-topology": ZONE}
    verdict = mutate_job(job(annotations=annotations, template_annotations=annotations), strategy)
    assert verdict.allowed
    assert verdict.patch == []
    assert verdict.warnings == ()


@pytest.mark.parametrize(
    ("job_annotations", "template_annotations", "default", "expected_template"),
    [
        # annotated on the Job only: the pods must learn the topology key
        ({TOPOLOGY_ANNOTATION: ZONE}, None, Strategy.GATE, {TOPOLOGY_ANNOTATION: ZONE}),
        # the Job's per-Job strategy differs from what the template resolves to with the default
        (
            {TOPOLOGY_ANNOTATION: ZONE, STRATEGY_ANNOTATION: "affinity"},
            {TOPOLOGY_ANNOTATION: ZONE},
            Strategy.GATE,
            {TOPOLOGY_ANNOTATION: ZONE, STRATEGY_ANNOTATION: "affinity"},
        ),
        # ours wins over JobSet's: the template had JobSet's key for another label
        (
            {TOPOLOGY_ANNOTATION: ZONE},
            {"alpha.jobset.sigs.k8s.io/exclusive-topology": "rack"},
            Strategy.AFFINITY,
            {"alpha.jobset.sigs.k8s.io/exclusive-topology": "rack", TOPOLOGY_ANNOTATION: ZONE},
        ),
    ],
)
def test_job_resolution_is_copied_into_the_pod_template(
    job_annotations: dict[str, str],
    template_annotations: dict[str, str] | None,
    default: Strategy,
    expected_template: dict[str, str],
) -> None:
    original = job(annotations=job_annotations, template_annotations=template_annotations)
    verdict = mutate_job(original, default)
    mutated = apply(original, verdict.patch)
    assert mutated["spec"]["template"]["metadata"]["annotations"] == expected_template
    assert mutated["metadata"] == original["metadata"]
    assert mutate_job(mutated, default).patch == []


def test_job_without_topology_is_untouched_whatever_the_strategy() -> None:
    verdict = mutate_job(job(annotations={STRATEGY_ANNOTATION: "elastic"}), Strategy.ELASTIC)
    assert (verdict.allowed, verdict.patch, verdict.reason) == (True, [], "not-exclusive")


def test_elastic_job_is_shrunk_and_target_recorded() -> None:
    original = job(template_annotations={"alpha.jobset.sigs.k8s.io/exclusive-topology": ZONE})
    verdict = mutate_job(original, Strategy.ELASTIC)
    assert verdict.allowed
    shrunk = apply(original, verdict.patch)
    assert (shrunk["spec"]["completions"], shrunk["spec"]["parallelism"]) == (1, 1)
    assert shrunk["metadata"]["annotations"] == {
        TARGET_COMPLETIONS_ANNOTATION: "4",
        TARGET_PARALLELISM_ANNOTATION: "4",
    }
    shard = pin_shard(NS, JOB, DEFAULT_FOLLOWER_SHARDS)
    assert shrunk["metadata"]["labels"] == {RESIZE_LABEL: "pending", PIN_SHARD_LABEL: shard}
    # The same record on the pod template: what the resizer trusts (no client changes it once the Job runs).
    assert shrunk["spec"]["template"]["metadata"]["annotations"] == {
        **original["spec"]["template"]["metadata"]["annotations"],
        **shrunk["metadata"]["annotations"],
    }
    # The shard on the pod template too: the pods carry it, what the follower policy's bindings match.
    assert shrunk["spec"]["template"]["metadata"]["labels"] == {PIN_SHARD_LABEL: shard}
    # The Job webhook is called once per Job (reinvocationPolicy: Never): a Job that arrives already
    # shrunk comes from a client, which may not choose its target. It keeps the size it came with (and
    # the shard label, no resize key: a wrong one only leaves its own followers to the resizer).
    again = mutate_job(shrunk, Strategy.ELASTIC)
    readmitted = apply(shrunk, again.patch)
    assert (readmitted["metadata"]["labels"], readmitted["metadata"]["annotations"]) == (
        {PIN_SHARD_LABEL: shard},
        {},
    )
    template = copy.deepcopy(original["spec"]["template"])
    template["metadata"]["labels"] = {PIN_SHARD_LABEL: shard}
    assert readmitted["spec"] == {**shrunk["spec"], "template": template}
    assert "removed" in again.warnings[0]
    assert f"{TARGET_COMPLETIONS_ANNOTATION} (pod template)" in again.warnings[0]


@pytest.mark.parametrize(("shards", "namespace"), [(1, NS), (16, NS), (64, NS), (16, "other")])
def test_a_shrunk_job_and_its_pod_template_are_labelled_with_its_follower_shard(
    shards: int, namespace: str
) -> None:
    """Whatever shard the client wrote is replaced; the request's namespace is hashed (the Job's own may be
    unset at admission)."""
    original = job(
        template_annotations={TOPOLOGY_ANNOTATION: ZONE},
        labels={PIN_SHARD_LABEL: "forged"},
    )
    original["metadata"].pop("namespace", None)
    verdict = mutate_job(original, Strategy.ELASTIC, namespace=namespace, follower_shards=shards)
    assert verdict.reason == "shrunk"
    shrunk = apply(original, verdict.patch)
    expected = pin_shard(namespace, JOB, shards)
    assert shards > 1 or expected == "0"
    assert shrunk["metadata"]["labels"][PIN_SHARD_LABEL] == expected
    assert shrunk["spec"]["template"]["metadata"]["labels"][PIN_SHARD_LABEL] == expected


def test_a_job_created_with_generate_name_is_sharded_by_its_generate_name() -> None:
    original = job(template_annotations={TOPOLOGY_ANNOTATION: ZONE})
    original["metadata"].pop("name")
    original["metadata"]["generateName"] = "sweep-"
    shrunk = apply(original, mutate_job(original, Strategy.ELASTIC, namespace=NS).patch)
    assert shrunk["metadata"]["labels"][PIN_SHARD_LABEL] == pin_shard(NS, "sweep-", 16)


@pytest.mark.parametrize(
    ("strategy", "spec"),
    [
        (Strategy.GATE, {}),
        (Strategy.AFFINITY, {}),
        (Strategy.SCHEDULING_GATE, {}),
        (Strategy.ELASTIC, {"completions": 1, "parallelism": 1}),  # one pod: no follower
        (Strategy.ELASTIC, {"completions": 4, "parallelism": 2}),  # falls back to gate
    ],
)
def test_only_a_shrunk_job_gets_a_follower_shard(strategy: Strategy, spec: dict[str, int]) -> None:
    original = job(template_annotations={TOPOLOGY_ANNOTATION: ZONE})
    original["spec"].update(spec)
    mutated = apply(original, mutate_job(original, strategy, namespace=NS).patch)
    assert PIN_SHARD_LABEL not in mutated["metadata"].get("labels", {})
    assert PIN_SHARD_LABEL not in mutated["spec"]["template"]["metadata"].get("labels", {})


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"completions": 4, "parallelism": 2}, "!= parallelism"),
        ({"completions": None}, "not set"),
    ],
)
def test_ineligible_elastic_job_falls_back_to_gate_with_warning(spec: dict[str, Any], why: str) -> None:
    original = job(annotations={"exclusive-placement.io/topology": ZONE}, **spec)
    verdict = mutate_job(original, Strategy.ELASTIC)
    assert verdict.allowed
    fallen_back = apply(original, verdict.patch)
    assert fallen_back["spec"]["template"]["metadata"]["annotations"] == {
        TOPOLOGY_ANNOTATION: ZONE,
        STRATEGY_ANNOTATION: "gate",
    }
    assert why in fallen_back["metadata"]["annotations"][ELASTIC_FALLBACK_ANNOTATION]
    assert fallen_back["spec"].get("completions") == original["spec"].get("completions")
    assert mutate_job(fallen_back, Strategy.ELASTIC).patch == []
    assert len(verdict.warnings) == 1
    assert why in verdict.warnings[0]
    assert "using gate" in verdict.warnings[0]


@pytest.mark.parametrize("asked", [Strategy.ELASTIC, Strategy.GATE, Strategy.SCHEDULING_GATE])
@pytest.mark.parametrize("mode", [None, "NonIndexed"])
def test_a_non_indexed_job_is_placed_with_affinity_and_a_warning(asked: Strategy, mode: str | None) -> None:
    """No completion index, no leader: every pod carries the leader's terms instead of following one."""
    original = job(annotations={TOPOLOGY_ANNOTATION: ZONE}, mode=mode)
    verdict = mutate_job(original, asked)
    placed = apply(original, verdict.patch)
    assert (verdict.allowed, verdict.reason) == (True, "non-indexed")
    assert placed["spec"]["template"]["metadata"]["annotations"][STRATEGY_ANNOTATION] == "affinity"
    assert (placed["spec"]["completions"], placed["spec"]["parallelism"]) == (4, 4)
    assert f"instead of {asked}" in verdict.warnings[0]
    assert "set completionMode: Indexed" in verdict.warnings[0]
    assert mutate_job(placed, asked).warnings == ()


def test_a_non_indexed_job_asking_for_affinity_gets_no_warning() -> None:
    original = job(annotations={TOPOLOGY_ANNOTATION: ZONE, STRATEGY_ANNOTATION: "affinity"}, mode=None)
    assert mutate_job(original, Strategy.ELASTIC).warnings == ()


def _child_of(startup: JobSetStartup, **annotations: str) -> tuple[dict[str, Any], JobSetStartup]:
    return job(annotations={TOPOLOGY_ANNOTATION: ZONE, **annotations}, jobset="trainer"), startup


@pytest.mark.parametrize(
    ("job_annotations", "jobset_strategy", "expected"),
    [
        ({}, "scheduling-gate", "scheduling-gate"),
        ({}, None, "elastic"),
        ({STRATEGY_ANNOTATION: "affinity"}, "scheduling-gate", "affinity"),
    ],
    ids=["the JobSet's", "the default", "the Job's own wins"],
)
def test_the_jobsets_own_strategy_is_its_jobs_default(
    job_annotations: dict[str, str], jobset_strategy: str | None, expected: str
) -> None:
    original, owner = _child_of(JobSetStartup(strategy=jobset_strategy), **job_annotations)
    verdict = mutate_job(original, Strategy.ELASTIC, owner=owner)
    placed = apply(original, verdict.patch)
    resolved = placed["spec"]["template"]["metadata"].get("annotations", {}).get(STRATEGY_ANNOTATION)
    assert (resolved or "elastic") == expected
    assert (RESIZE_LABEL in placed["metadata"].get("labels", {})) is (expected == "elastic")


def test_an_unknown_strategy_on_the_jobset_denies_its_jobs_naming_the_valid_values() -> None:
    original, owner = _child_of(JobSetStartup(strategy="fastest"))
    verdict = mutate_job(original, Strategy.ELASTIC, owner=owner)
    assert not verdict.allowed
    assert "on its JobSet: unknown exclusive placement strategy 'fastest'" in verdict.message
    assert "valid values: elastic, gate, scheduling-gate, affinity" in verdict.message


def test_single_pod_job_needs_no_shrink_and_no_warning() -> None:
    annotations = {"exclusive-placement.io/topology": ZONE}
    verdict = mutate_job(
        job(annotations=annotations, template_annotations=annotations, completions=1, parallelism=1),
        Strategy.ELASTIC,
    )
    assert (verdict.patch, verdict.warnings) == ([], ())


def test_job_with_unknown_strategy_is_denied() -> None:
    annotations = {"exclusive-placement.io/topology": ZONE, STRATEGY_ANNOTATION: "nope"}
    verdict = mutate_job(job(annotations=annotations), Strategy.ELASTIC)
    assert not verdict.allowed
    assert "valid values: elastic, gate, scheduling-gate, affinity" in verdict.message


# --- Pods: scope -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("the_pod", "reason", "warned"),
    [
        (pod(1, topology=None), "not-exclusive", False),
        (_without_job(pod(0)), "no-job", True),
        (pod(1, strategy="bogus"), "invalid-strategy", False),
        (_node_selector_mode(pod(1)), "jobset-node-selector", False),
    ],
)
def test_out_of_scope_pods(the_pod: dict[str, Any], reason: str, warned: bool) -> None:
    plan = plan_pod(the_pod, NS, Strategy.ELASTIC)
    assert isinstance(plan, Skip)
    assert plan.verdict.reason == reason
    assert plan.verdict.patch == []
    assert bool(plan.verdict.warnings) is warned
    assert plan.verdict.allowed is (reason != "invalid-strategy")


@pytest.mark.parametrize(
    ("the_pod", "needle"),
    [
        (_without_job(pod(3)), "pod with completion index 3 asks for exclusive placement"),
        (_without_job(pod(None)), "pod without a completion index asks for exclusive placement"),
        ({"metadata": {"annotations": {TOPOLOGY_ANNOTATION: ZONE}}}, "no controller ownerReference"),
    ],
    ids=["follower", "no index", "bare pod"],
)
def test_a_follower_without_a_job_is_denied_as_jobset_denies_it(the_pod: dict[str, Any], needle: str) -> None:
    """JobSet's podsOwnedBySameJob: "follower pod has no owner reference"; there is no leader to follow."""
    plan = plan_pod(the_pod, NS, Strategy.ELASTIC)
    assert isinstance(plan, Skip)
    assert (plan.verdict.allowed, plan.verdict.reason) == (False, "no-job")
    assert needle in plan.verdict.message
    assert "create it through an Indexed Job" in plan.verdict.message


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_jobsets_node_selector_mode_is_left_to_the_users_node_selector(strategy: str) -> None:
    """JobSet's webhooks skip pods with `alpha.jobset.sigs.k8s.io/node-selector`: no affinity, no
    follower rejection; the pods already select their pre-labelled pool."""
    for index in (0, 1):
        plan = plan_pod(_node_selector_mode(pod(index, strategy=strategy)), NS, Strategy.ELASTIC)
        assert isinstance(plan, Skip)
        assert (plan.verdict.allowed, plan.verdict.patch, plan.verdict.reason) == (
            True,
            [],
            "jobset-node-selector",
        )


def test_plan_derives_the_job_key_from_namespace_and_job() -> None:
    plan = _plan(pod(2, strategy="gate", labels={JOBSET_JOB_KEY_LABEL: job_key(NS, JOB)}))
    assert plan == PodPlan(NS, JobRef(JOB, UID), job_key(NS, JOB), ZONE, Strategy.GATE, False, "2")
    assert _plan(pod(0)).job_key == job_key(NS, JOB)


@pytest.mark.parametrize("index", [0, 2])
def test_a_pod_carrying_another_jobs_jobset_key_is_denied(index: int) -> None:
    forged = job_key("team-b", "victim")
    plan = plan_pod(pod(index, labels={JOBSET_JOB_KEY_LABEL: forged}), NS, Strategy.ELASTIC)
    assert isinstance(plan, Skip)
    assert (plan.verdict.allowed, plan.verdict.reason) == (False, "forged-job-key")
    assert forged in plan.verdict.message
    assert job_key(NS, JOB) in plan.verdict.message


JOB_CONTROLLER = "system:serviceaccount:kube-system:job-controller"


@pytest.mark.parametrize("index", [0, 2, None])
@pytest.mark.parametrize("claim", ["ownerReference", "job-name label"])
def test_a_pod_claiming_a_job_that_the_job_controller_does_not_create_is_denied(
    index: int | None, claim: str
) -> None:
    """The Job controller orphans such a pod (it is not one of the Job's), and the job-key label of an
    admitted exclusive pod would then hold its domain until someone deletes it (issue 30, row 6)."""
    the_pod = pod(index)
    if claim == "job-name label":
        the_pod["metadata"].pop("ownerReferences")
    plan = plan_pod(the_pod, NS, Strategy.ELASTIC, Creator("system:serviceaccount:team-a:tenant"))
    assert isinstance(plan, Skip)
    assert (plan.verdict.allowed, plan.verdict.reason) == (False, "not-created-by-job-controller")
    assert f"pod of Job {JOB}" in plan.verdict.message
    assert "system:serviceaccount:team-a:tenant is not the Job controller" in plan.verdict.message


def test_the_job_controllers_pods_are_planned_and_the_job_controller_is_configurable() -> None:
    assert JOB_CONTROLLER in DEFAULT_JOB_CONTROLLER_USERNAMES
    assert plan_pod(pod(0), NS, Strategy.ELASTIC, Creator(JOB_CONTROLLER)) == _plan(pod(0))
    ours = Creator(
        "system:serviceaccount:ops:our-job-controller",
        frozenset({"system:serviceaccount:ops:our-job-controller"}),
    )
    assert isinstance(plan_pod(pod(1), NS, Strategy.ELASTIC, ours), PodPlan)
    denied = plan_pod(pod(1), NS, Strategy.ELASTIC, Creator(JOB_CONTROLLER, ours.job_controllers))
    assert isinstance(denied, Skip)
    assert denied.verdict.reason == "not-created-by-job-controller"


def test_a_pod_without_a_job_is_judged_as_before_whoever_creates_it() -> None:
    plan = plan_pod(_without_job(pod(0)), NS, Strategy.ELASTIC, Creator("alice@example.com"))
    assert isinstance(plan, Skip)
    assert (plan.verdict.allowed, plan.verdict.reason) == (True, "no-job")


# --- Pods: mutation, every strategy x role x leader state ----------------------------------------------

UNBOUND = LeaderState(LeaderStatus.NOT_SCHEDULED, "leader-0")
MISSING = LeaderState(LeaderStatus.NOT_FOUND)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_leader_gets_labels_and_both_affinity_terms(strategy: str) -> None:
    the_pod = pod(0, strategy=strategy)
    plan = _plan(the_pod)
    assert not mutation_needs_leader(plan)
    verdict = mutate_pod(the_pod, plan, None)
    result = apply(the_pod, verdict.patch)
    assert result["metadata"]["labels"][ROLE_LABEL] == "leader"
    assert result["metadata"]["labels"][JOB_KEY_LABEL] == plan.job_key
    affinity = result["spec"]["affinity"]
    assert affinity["podAffinity"][REQUIRED][0]["topologyKey"] == ZONE
    assert affinity["podAntiAffinity"][REQUIRED][0]["labelSelector"]["matchExpressions"][1]["values"] == [
        plan.job_key
    ]
    assert "nodeSelector" not in result["spec"]
    assert mutate_pod(result, _plan(result), None).patch == []


# (strategy, completion index, spec.priority) -> every exclusive pod's priority label; the leader's
# anti-affinity (and, with `affinity`, every pod's) selects only the other Jobs of that priority.
PRIORITY_CASES = [
    (strategy, index, priority, expected)
    for strategy in STRATEGIES
    for index in (0, 2)
    for priority, expected in ((1000, "1000"), (0, "0"), (-10, "-10"), (None, "0"))
]


@pytest.mark.parametrize(("strategy", "index", "priority", "expected"), PRIORITY_CASES)
def test_every_exclusive_pod_is_labelled_with_its_priority(
    strategy: str, index: int, priority: int | None, expected: str
) -> None:
    spec = {} if priority is None else {"priority": priority}
    the_pod = pod(index, strategy=strategy, spec=spec, labels={PRIORITY_LABEL: "forged"})
    plan = _plan(the_pod)
    result = apply(the_pod, mutate_pod(the_pod, plan, BOUND).patch)
    assert result["metadata"]["labels"][PRIORITY_LABEL] == expected
    anti = result["spec"].get("affinity", {}).get("podAntiAffinity", {}).get(REQUIRED, [])
    has_terms = index == 0 or strategy == "affinity"
    assert [t["labelSelector"]["matchExpressions"][-1] for t in anti] == (
        [{"key": PRIORITY_LABEL, "operator": "In", "values": [expected]}] if has_terms else []
    )
    assert mutate_pod(result, _plan(result), BOUND).patch == []


def test_leader_affinity_is_merged_with_the_pods_own() -> None:
    own = {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "kubernetes.io/hostname"}
    the_pod = pod(0, spec={"affinity": {"podAntiAffinity": {REQUIRED: [own]}}})
    result = apply(the_pod, mutate_pod(the_pod, _plan(the_pod), None).patch)
    assert result["spec"]["affinity"]["podAntiAffinity"][REQUIRED][0] == own
    assert len(result["spec"]["affinity"]["podAntiAffinity"][REQUIRED]) == 2


# (strategy, leader state) -> expected follower: nodeSelector value, gated?
FOLLOWER_CASES = [
    ("elastic", BOUND, "zone-a", False),
    ("elastic", UNBOUND, None, True),  # a cache behind the resize: the resizer pins and releases it
    ("elastic", MISSING, None, True),
    ("gate", BOUND, "zone-a", False),
    ("gate", UNBOUND, None, False),
    ("scheduling-gate", BOUND, "zone-a", False),
    ("scheduling-gate", UNBOUND, None, True),
    ("scheduling-gate", MISSING, None, True),
    ("elastic", LeaderState(LeaderStatus.NODE_MISSING, "leader-0", "gone"), None, True),
    ("gate", LeaderState(LeaderStatus.NODE_WITHOUT_DOMAIN, "leader-0", "node-1"), None, False),
]


@pytest.mark.parametrize(("strategy", "state", "selector", "gated"), FOLLOWER_CASES)
def test_follower_mutation(strategy: str, state: LeaderState, selector: str | None, gated: bool) -> None:
    the_pod = pod(3, strategy=strategy, spec={"nodeSelector": {"gpu": "a100"}})
    plan = _plan(the_pod)
    assert mutation_needs_leader(plan)
    verdict = mutate_pod(the_pod, plan, state)
    assert verdict.allowed
    result = apply(the_pod, verdict.patch)
    assert result["metadata"]["labels"][ROLE_LABEL] == "follower"
    assert result["spec"]["nodeSelector"].get(ZONE) == selector
    assert result["spec"]["nodeSelector"]["gpu"] == "a100"
    assert (result["spec"].get("schedulingGates") == [{"name": LEADER_SCHEDULED_GATE}]) is gated
    assert "affinity" not in result["spec"]
    assert mutate_pod(result, plan, state).patch == []


@pytest.mark.parametrize(("strategy", "state", "selector", "gated"), FOLLOWER_CASES)
def test_admission_in_one_call_denies_exactly_what_validation_of_the_mutation_denies(
    strategy: str, state: LeaderState, selector: str | None, gated: bool
) -> None:
    """`admit_pod` (the one call of the webhook path) = `mutate_pod`, then `validate_pod` of its result."""
    the_pod = pod(3, strategy=strategy, spec={"nodeSelector": {"gpu": "a100"}})
    plan = _plan(the_pod)
    mutation = mutate_pod(the_pod, plan, state)
    validation = validate_pod(apply(the_pod, mutation.patch), plan, state)
    verdict = admit_pod(the_pod, plan, state)
    assert verdict.allowed is validation.allowed
    assert verdict.allowed is (selector is not None or gated)
    assert verdict == (mutation if validation.allowed else validation)


def test_affinity_strategy_follower_gets_the_leaders_terms_without_lookup() -> None:
    the_pod = pod(2, strategy="affinity")
    plan = _plan(the_pod)
    assert not mutation_needs_leader(plan)
    result = apply(the_pod, mutate_pod(the_pod, plan, None).patch)
    assert result["metadata"]["labels"][ROLE_LABEL] == "follower"
    assert result["spec"]["affinity"]["podAffinity"][REQUIRED][0]["topologyKey"] == ZONE
    assert "nodeSelector" not in result["spec"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_pod_of_a_non_indexed_job_carries_the_leaders_terms_whatever_its_strategy(strategy: str) -> None:
    """It is never admitted unplaced: with no leader to follow, it is placed as under `affinity`."""
    the_pod = pod(None, strategy=strategy)
    plan = _plan(the_pod)
    assert (plan.strategy, plan.leader, plan.index) == (Strategy.AFFINITY, False, "")
    assert not mutation_needs_leader(plan)
    result = apply(the_pod, mutate_pod(the_pod, plan, None).patch)
    assert result["spec"]["affinity"]["podAffinity"][REQUIRED][0]["topologyKey"] == ZONE
    assert result["spec"]["affinity"]["podAntiAffinity"][REQUIRED][0]["topologyKey"] == ZONE
    assert validate_pod(result, plan, None).allowed


def test_follower_selector_conflict_is_replaced_with_a_warning() -> None:
    the_pod = pod(1, spec={"nodeSelector": {ZONE: "zone-z"}})
    verdict = mutate_pod(the_pod, _plan(the_pod), BOUND)
    assert apply(the_pod, verdict.patch)["spec"]["nodeSelector"] == {ZONE: "zone-a"}
    assert "zone-z" in verdict.warnings[0]


def test_follower_mutation_requires_leader_state() -> None:
    with pytest.raises(ValueError, match="needs the leader's state"):
        mutate_pod(pod(1), _plan(pod(1)), None)


# --- Pods: validation ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("the_pod", "state", "allowed", "needle"),
    [
        (pod(0), None, True, ""),
        (pod(4, strategy="affinity"), None, True, ""),
        (
            pod(4, strategy="scheduling-gate", spec={"schedulingGates": [{"name": LEADER_SCHEDULED_GATE}]}),
            None,
            True,
            "",
        ),
        (pod(4, spec={"nodeSelector": {ZONE: "zone-a"}}), BOUND, True, ""),
        (pod(4, strategy="gate", spec={"nodeSelector": {ZONE: "zone-a"}}), BOUND, True, ""),
        (pod(4), MISSING, False, "does not exist yet"),
        (pod(4, strategy="gate"), UNBOUND, False, "leader pod leader-0 is not yet scheduled"),
        (
            pod(4),
            LeaderState(LeaderStatus.NODE_MISSING, "leader-0", "gone"),
            False,
            "node gone, which no longer exists",
        ),
        (
            pod(4),
            LeaderState(LeaderStatus.NODE_WITHOUT_DOMAIN, "leader-0", "n"),
            False,
            f"has no {ZONE} label",
        ),
        (pod(4), BOUND, False, f"nodeSelector[{ZONE}] is not set"),
        (
            pod(4, spec={"nodeSelector": {ZONE: "zone-b"}}),
            BOUND,
            False,
            "is 'zone-b', but leader pod leader-0 runs in",
        ),
        (pod(4, strategy="scheduling-gate"), UNBOUND, False, "not yet scheduled"),
    ],
)
def test_validation(the_pod: dict[str, Any], state: LeaderState | None, allowed: bool, needle: str) -> None:
    plan = _plan(the_pod)
    assert validation_needs_leader(the_pod, plan) is (state is not None)
    verdict = validate_pod(the_pod, plan, state)
    assert verdict.allowed is allowed
    assert verdict.patch == []
    assert needle in verdict.message
    if not allowed:
        assert f"completion index 4) of Job {NS}/{JOB}" in verdict.message


# --- Leader selection ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "leader",
    [
        pod(0, node="n1", deleting=True),
        pod(0, node="n1", phase="Failed"),
        pod(0, node="n1", phase="Succeeded"),
        pod(0, node="n1", uid="old-uid"),
        pod(0, node="n1", job_name="other"),
        pod(1, node="n1"),
    ],
    ids=["terminating", "failed", "succeeded", "earlier Job uid", "other Job", "a follower"],
)
def test_a_leader_that_cannot_lead_counts_as_not_found(leader: dict[str, Any]) -> None:
    # placement.leader.pick_leader may return such a pod when it is the only candidate
    assert leader_state(_plan(pod(1)), leader, node()).status is LeaderStatus.NOT_FOUND


def test_leader_state_summarises_leader_and_node() -> None:
    plan = _plan(pod(1))
    assert leader_state(plan, None, None).status is LeaderStatus.NOT_FOUND
    assert leader_state(plan, pod(0), None).status is LeaderStatus.NOT_SCHEDULED
    assert leader_state(plan, pod(0, node="node-1"), None) == LeaderState(
        LeaderStatus.NODE_MISSING, f"{JOB}-0-abcde", "node-1"
    )
    assert (
        leader_state(plan, pod(0, node="node-1"), node(labels={})).status is LeaderStatus.NODE_WITHOUT_DOMAIN
    )
    assert leader_state(plan, pod(0, node="node-1"), node()) == LeaderState(
        LeaderStatus.BOUND, f"{JOB}-0-abcde", "node-1", "zone-a"
    )


def test_two_live_leaders_bound_in_different_domains_make_the_follower_wait() -> None:
    """JobSet denies a follower unless exactly one live leader exists (leaderPodForFollower); here two live
    leaders of the same Job uid in different domains gate it (the resizer's release waits for one leader) and
    deny it ungated as transient, instead of pinning it to one."""
    plan = _plan(pod(1))
    leader, rival = pod(0, node="node-1"), pod(0, node="node-2")
    rival["metadata"]["name"] = f"{JOB}-0-fghij"
    state = leader_state(plan, leader, node(), [(rival, node("node-2", {ZONE: "zone-b"}))])
    assert state == LeaderState(
        LeaderStatus.LEADERS_DISAGREE, f"{JOB}-0-abcde", "node-1", "zone-a", f"{JOB}-0-fghij", "zone-b"
    )
    the_pod = pod(1)
    gated_follower = apply(the_pod, mutate_pod(the_pod, plan, state).patch)
    assert ZONE not in (gated_follower["spec"].get("nodeSelector") or {})
    assert gated_follower["spec"]["schedulingGates"] == [{"name": LEADER_SCHEDULED_GATE}]
    verdict = validate_pod(the_pod, plan, state)
    assert (verdict.allowed, verdict.reason) == (False, "leader-leaders-disagree")
    assert "two live leader pods of this Job are bound in different domains" in verdict.message
    assert "expected and transient" in verdict.message
    gated = pod(1, strategy="scheduling-gate")
    gated_plan = _plan(gated)
    assert apply(gated, mutate_pod(gated, gated_plan, state).patch)["spec"]["schedulingGates"] == [
        {"name": LEADER_SCHEDULED_GATE}
    ]


@pytest.mark.parametrize(
    ("rival_node", "status"),
    [
        (node("node-2", {ZONE: "zone-a"}), LeaderStatus.BOUND),
        (None, LeaderStatus.LEADERS_DISAGREE),
        (node("node-2", {}), LeaderStatus.LEADERS_DISAGREE),
    ],
    ids=["same domain", "unknown node", "node without the label"],
)
def test_a_second_leader_only_matters_outside_the_first_ones_domain(
    rival_node: dict[str, Any] | None, status: LeaderStatus
) -> None:
    state = leader_state(_plan(pod(1)), pod(0, node="node-1"), node(), [(pod(0, node="node-2"), rival_node)])
    assert state.status is status


def test_mutation_never_changes_its_input() -> None:
    the_pod = pod(1)
    before = copy.deepcopy(the_pod)
    mutate_pod(the_pod, _plan(the_pod), BOUND)
    assert the_pod == before


@pytest.mark.parametrize("bad_spec", ["a string", 7, ["a", "list"], None])
def test_job_whose_spec_is_not_a_map_gets_an_answer_not_an_exception(bad_spec: object) -> None:
    malformed = job(annotations={"exclusive-placement.io/topology": ZONE})
    malformed["spec"] = bad_spec
    verdict = mutate_job(malformed, Strategy.ELASTIC)
    assert verdict.allowed
    assert verdict.patch == []
    assert "no pod is its leader" in verdict.warnings[0]
