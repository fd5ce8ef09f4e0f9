"""The two paths of pod admission in the rendered chart (docs/webhook.md, "Two paths for pods").

`webhook.admission.pods.path` policy renders the pod MutatingAdmissionPolicies and ValidatingAdmissionPolicy
with their bindings, and hands the pod webhook only what they do not admit; webhook renders none of them;
auto asks `.Capabilities` (offline, Helm's built-in list, which lacks MutatingAdmissionPolicy v1: the
webhook path) and NOTES.txt says how it decided. What the policies decide is tested on the real API server
(tests/kube/test_kube_pod_policies.py).
"""

from __future__ import annotations

import kubernetes_validate
import pytest

from placement.constants import (
    DEFAULT_FOLLOWER_SHARDS,
    LEADER_DOMAIN_ANNOTATION,
    PIN_FOLLOWERS,
    PIN_FOLLOWERS_LABEL,
    PIN_SHARD_LABEL,
)
from tests.chart.chart_rendering import (
    Obj,
    merged,
    named,
    of_component,
    of_kind,
    render,
    render_templates,
    webhooks,
)

POLICY_KINDS = (
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
)


def with_path(mode_values: dict[str, Obj], path: str) -> Obj:
    return merged(mode_values["provided"], {"webhook": {"admission": {"pods": {"path": path}}}})


def pod_webhook(objects: list[Obj]) -> Obj:
    found = [w for _, w in webhooks(objects) if w["name"] == "pods.mutate.exclusive-placement.io"]
    assert len(found) == 1
    return found[0]


POD_POLICY_NAMES = ("placement-pods", "placement-pod-followers")
"""`<fullname>-pods` and `<fullname>-pod-followers` (not the resizer's `<fullname>-resizer-pods`)."""
FOLLOWERS = "exclusive-placement-pod-followers"


def pod_policy_objects(objects: list[Obj]) -> list[Obj]:
    return [
        o
        for o in objects
        if o["kind"] in POLICY_KINDS
        and (
            o["metadata"]["name"].endswith(POD_POLICY_NAMES)
            or o["metadata"]["name"].startswith(f"{FOLLOWERS}-")
        )
    ]


def follower_bindings(objects: list[Obj]) -> dict[str, Obj]:
    """The follower policy's bindings by name: `<fullname>-pod-followers-<k>` per shard, and the catch-all."""
    return {
        b["metadata"]["name"]: b
        for b in of_kind(objects, "MutatingAdmissionPolicyBinding")
        if b["spec"]["policyName"] == FOLLOWERS
    }


def shard_expression(operator: str, shards: list[str]) -> Obj:
    return {"key": PIN_SHARD_LABEL, "operator": operator, "values": shards}


NOT_A_LEADER = {"key": "batch.kubernetes.io/job-completion-index", "operator": "NotIn", "values": ["0"]}
"""Every follower binding leaves leaders out by the Job controller's index label (no evaluation per param)."""


@pytest.fixture(scope="module")
def policy_path(mode_values: dict[str, Obj]) -> list[Obj]:
    return render(with_path(mode_values, "policy"))


def test_policy_path_renders_both_mutating_policies_and_the_validating_one_with_their_bindings(
    policy_path: list[Obj],
) -> None:
    found = sorted((o["kind"], o["metadata"]["name"]) for o in pod_policy_objects(policy_path))
    assert found == sorted(
        [
            ("MutatingAdmissionPolicy", "exclusive-placement-pods"),
            ("MutatingAdmissionPolicyBinding", "exclusive-placement-pods"),
            ("MutatingAdmissionPolicy", "exclusive-placement-pod-followers"),
            ("MutatingAdmissionPolicyBinding", "exclusive-placement-pod-followers"),
            *(
                ("MutatingAdmissionPolicyBinding", f"exclusive-placement-pod-followers-{k}")
                for k in range(DEFAULT_FOLLOWER_SHARDS)
            ),
            ("ValidatingAdmissionPolicy", "exclusive-placement-pods"),
            ("ValidatingAdmissionPolicyBinding", "exclusive-placement-pods"),
        ]
    )
    for binding in of_kind(policy_path, "MutatingAdmissionPolicyBinding"):
        assert binding["metadata"]["name"].startswith(binding["spec"]["policyName"])


def test_every_pod_policy_is_valid_kubernetes_1_36(policy_path: list[Obj]) -> None:
    for obj in pod_policy_objects(policy_path):
        kubernetes_validate.validate(obj, "1.36.0", strict=True)


def test_pod_policies_fail_closed_are_never_reinvoked_and_see_only_pod_creations(
    policy_path: list[Obj],
) -> None:
    for kind in ("MutatingAdmissionPolicy", "ValidatingAdmissionPolicy"):
        for policy in of_kind(policy_path, kind):
            if not policy["metadata"]["name"].endswith(POD_POLICY_NAMES):
                continue
            spec = policy["spec"]
            assert spec["failurePolicy"] == "Fail"
            assert spec["matchConstraints"]["resourceRules"] == [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
            ]
            if kind.startswith("Mutating"):
                assert spec["reinvocationPolicy"] == "Never"


def test_the_follower_pin_reads_the_running_resized_jobs_of_the_pods_namespace(
    policy_path: list[Obj],
) -> None:
    """The params are the Jobs labelled pin-followers (the resizer sets the label in the resize and removes
    it once the Job finished), not every Job ever resized (`resize: done` stays until the Job is deleted:
    one evaluation per pod and finished Job)."""
    policy = named(policy_path, "MutatingAdmissionPolicy", "-pod-followers")
    assert policy["spec"]["paramKind"] == {"apiVersion": "batch/v1", "kind": "Job"}
    for binding in follower_bindings(policy_path).values():
        param_ref = binding["spec"]["paramRef"]
        assert param_ref["selector"]["matchLabels"][PIN_FOLLOWERS_LABEL] == PIN_FOLLOWERS
        assert param_ref["parameterNotFoundAction"] == "Allow"
        assert "namespace" not in param_ref, "the params are read in the namespace of the pod"
    conditions = " ".join(c["expression"] for c in policy["spec"]["matchConditions"])
    assert "params.metadata.uid ==" in conditions
    assert LEADER_DOMAIN_ANNOTATION in conditions


def test_policy_bindings_cover_the_namespaces_the_webhooks_cover(mode_values: dict[str, Obj]) -> None:
    values = merged(
        with_path(mode_values, "policy"),
        {
            "webhook": {
                "admission": {
                    "exemptNamespaces": ["batch-free"],
                    "objectSelector": {"matchLabels": {"a": "b"}},
                }
            }
        },
    )
    objects = render(values)
    webhook = pod_webhook(objects)
    bindings = [o for o in pod_policy_objects(objects) if o["kind"].endswith("Binding")]
    assert len(bindings) == 3 + DEFAULT_FOLLOWER_SHARDS
    assert webhook["objectSelector"] == {"matchLabels": {"a": "b"}}
    for binding in bindings:
        resources = binding["spec"]["matchResources"]
        assert resources["namespaceSelector"] == webhook["namespaceSelector"]
        if binding["spec"]["policyName"] != FOLLOWERS:
            assert resources["objectSelector"] == webhook["objectSelector"]
        else:  # the user's objectSelector ANDed with the binding's shard and "not a leader"
            assert resources["objectSelector"]["matchLabels"] == {"a": "b"}
            keys = [e["key"] for e in resources["objectSelector"]["matchExpressions"]]
            assert keys == [PIN_SHARD_LABEL, NOT_A_LEADER["key"]]


@pytest.mark.parametrize("shards", [1, 4, 16, DEFAULT_FOLLOWER_SHARDS])
def test_the_follower_policy_is_bound_once_per_shard_and_once_for_pods_without_a_shard(
    mode_values: dict[str, Obj], shards: int
) -> None:
    """Binding k matches the pods of shard k and takes as params the pin-followers Jobs of shard k; the
    catch-all keeps today's name and pins the pods of Jobs without a shard of this count (created before
    the shards, or under another count) from the Jobs likewise without one (NotIn matches a missing label).
    The user's objectSelector (matchLabels and matchExpressions) is ANDed with each, and "not a leader"."""
    user = {"matchLabels": {"team": "a"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}
    values = merged(
        with_path(mode_values, "policy"),
        {"webhook": {"admission": {"objectSelector": user, "pods": {"followerShards": shards}}}},
    )
    objects = render(values)
    bindings = follower_bindings(objects)
    all_shards = [str(k) for k in range(shards)]
    assert sorted(bindings) == sorted([FOLLOWERS, *(f"{FOLLOWERS}-{k}" for k in all_shards)])
    for k in all_shards:
        spec = bindings[f"{FOLLOWERS}-{k}"]["spec"]
        assert spec["paramRef"]["selector"] == {
            "matchLabels": {PIN_FOLLOWERS_LABEL: PIN_FOLLOWERS, PIN_SHARD_LABEL: k}
        }
        assert spec["matchResources"]["objectSelector"] == {
            "matchLabels": {"team": "a"},
            "matchExpressions": [
                {"key": "tier", "operator": "Exists"},
                shard_expression("In", [k]),
                NOT_A_LEADER,
            ],
        }
    catch_all = bindings[FOLLOWERS]["spec"]
    assert catch_all["paramRef"]["selector"] == {
        "matchLabels": {PIN_FOLLOWERS_LABEL: PIN_FOLLOWERS},
        "matchExpressions": [shard_expression("NotIn", all_shards)],
    }
    assert catch_all["matchResources"]["objectSelector"] == {
        "matchLabels": {"team": "a"},
        "matchExpressions": [
            {"key": "tier", "operator": "Exists"},
            shard_expression("NotIn", all_shards),
            NOT_A_LEADER,
        ],
    }
    for binding in bindings.values():
        kubernetes_validate.validate(binding, "1.36.0", strict=True)


def test_the_webhook_is_told_the_charts_follower_shards(mode_values: dict[str, Obj]) -> None:
    for shards in (1, 7):
        values = merged(
            mode_values["provided"], {"webhook": {"admission": {"pods": {"followerShards": shards}}}}
        )
        webhook = [
            d for d in of_kind(render(values), "Deployment") if d["metadata"]["name"].endswith("-webhook")
        ]
        args = webhook[0]["spec"]["template"]["spec"]["containers"][0]["args"]
        assert f"--follower-shards={shards}" in args


def test_on_the_policy_path_the_pod_webhook_takes_only_what_the_policies_do_not(
    policy_path: list[Obj],
) -> None:
    policy = named(policy_path, "MutatingAdmissionPolicy", "placement-pods")
    scope = policy["spec"]["matchConditions"][0]["expression"]
    conditions = {c["name"]: c["expression"] for c in pod_webhook(policy_path)["matchConditions"]}
    assert conditions["not-admitted-by-policy"] == f"!{scope}"
    validating = named(policy_path, "ValidatingAdmissionPolicy", "placement-pods")
    assert validating["spec"]["matchConditions"][0]["expression"] == scope


@pytest.mark.parametrize("path", ["webhook", "auto"])
def test_the_webhook_path_renders_no_pod_policy_and_sends_every_exclusive_pod_to_the_webhook(
    mode_values: dict[str, Obj], path: str
) -> None:
    objects = render(with_path(mode_values, path))
    assert pod_policy_objects(objects) == []
    names = [c["name"] for c in pod_webhook(objects)["matchConditions"]]
    assert names == ["exclusive-placement-pod", "not-jobset-node-selector-mode"]


@pytest.mark.parametrize(
    ("path", "said"),
    [
        (
            "auto",
            "Pod admission: webhook (webhook.admission.pods.path=auto: the API does not serve "
            "admissionregistration.k8s.io/v1 MutatingAdmissionPolicy).",
        ),
        ("policy", "Pod admission: policy (webhook.admission.pods.path=policy)."),
        ("webhook", "Pod admission: webhook (webhook.admission.pods.path=webhook)."),
    ],
)
def test_notes_say_which_path_was_rendered_and_why(mode_values: dict[str, Obj], path: str, said: str) -> None:
    notes = render_templates(with_path(mode_values, path))["exclusive-placement/templates/NOTES.txt"]
    assert said in notes


def test_default_strategy_is_what_the_policies_assume_for_a_pod_without_one(
    mode_values: dict[str, Obj],
) -> None:
    values = merged(with_path(mode_values, "policy"), {"placement": {"defaultStrategy": "affinity"}})
    policy = named(render(values), "MutatingAdmissionPolicy", "placement-pods")
    scope = policy["spec"]["matchConditions"][0]["expression"]
    assert ": 'affinity')" in scope
    assert ": 'elastic')" not in scope


def test_the_leader_has_one_anti_affinity_term_and_only_the_job_controllers_pods_are_in_scope(
    policy_path: list[Obj],
) -> None:
    """kube-scheduler v1.36.3 requeues a pod waiting on anti-affinity, when a scheduled pod goes, only if
    that pod matches all its anti-affinity terms: one term, as JobSet's (docs/webhook.md, "Two paths for
    pods"). Cross-namespace forgeries are kept out by the scope instead: a pod only the Job controller
    created carries its own Job's uid; every other pod goes to the webhook."""
    policy = named(policy_path, "MutatingAdmissionPolicy", "placement-pods")
    expressions = " ".join(
        str(m.get("applyConfiguration", m.get("jsonPatch", {})).get("expression"))
        for m in policy["spec"]["mutations"]
    )
    assert expressions.count("podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution/-") == 1
    assert "job-namespace" not in expressions
    scope = policy["spec"]["matchConditions"][0]["expression"]
    assert scope.startswith(
        "(request.userInfo.username in "
        "['system:serviceaccount:kube-system:job-controller','system:kube-controller-manager'] && "
    )
    webhook = next(
        w
        for o in policy_path
        if o["kind"] == "MutatingWebhookConfiguration"
        for w in o["webhooks"]
        if w["name"].startswith("pods.")
    )
    conditions = {c["name"]: c["expression"] for c in webhook["matchConditions"]}
    assert conditions["not-admitted-by-policy"] == f"!{scope}"  # the webhook takes exactly the rest


@pytest.mark.parametrize(
    ("path", "flag"),
    [
        ("policy", "--pin-followers-label"),
        ("webhook", "--no-pin-followers-label"),
        ("auto", "--no-pin-followers-label"),  # offline: Helm's built-in list, the webhook path
    ],
)
def test_the_resizer_labels_resized_jobs_pin_followers_only_on_the_policy_path(
    mode_values: dict[str, Obj], path: str, flag: str
) -> None:
    """No policy reads the label on the webhook path: the resizer sets none, so its removal at the Job's
    finish costs no request there either."""
    resizer = of_component(render(with_path(mode_values, path)), "Deployment", "resizer")
    args = resizer["spec"]["template"]["spec"]["containers"][0]["args"]
    assert [arg for arg in args if arg.endswith("pin-followers-label")] == [flag]
