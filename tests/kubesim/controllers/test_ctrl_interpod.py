"""Inter-pod affinity terms and the domain-count index that answers them."""

from typing import Any

import pytest

from kubesim.controllers.interpod import (
    REASON_EXISTING_ANTI_AFFINITY,
    AffinityCheck,
    AffinityIndex,
    AffinityTerm,
    PodMatcher,
    parse_term,
    required_terms,
)

KEY = "exclusive-placement.io/job-key"
POOL = "cloud.google.com/gke-nodepool"


def _exclusive_terms(
    own: str, namespace_selector: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    affinity = {
        "labelSelector": {"matchExpressions": [{"key": KEY, "operator": "In", "values": [own]}]},
        "topologyKey": POOL,
    }
    anti = {
        "labelSelector": {
            "matchExpressions": [
                {"key": KEY, "operator": "Exists"},
                {"key": KEY, "operator": "NotIn", "values": [own]},
            ]
        },
        "topologyKey": POOL,
    }
    if namespace_selector is not None:
        affinity["namespaceSelector"] = namespace_selector
        anti["namespaceSelector"] = namespace_selector
    return affinity, anti


def _has(index: AffinityIndex, term: AffinityTerm, domain: str) -> bool:
    return index.domain_has_match(PodMatcher.of([term]), term.topology_key, domain)


def _anywhere(index: AffinityIndex, term: AffinityTerm) -> bool:
    return index.holds_match(PodMatcher.of([term]), term.topology_key)


def _index() -> AffinityIndex:
    index = AffinityIndex()
    for node, pool in (("n1", "a"), ("n2", "a"), ("n3", "b"), ("n4", "c")):
        index.set_node(node, {POOL: pool, "kubernetes.io/hostname": node})
    return index


def test_parse_term_defaults_to_the_pods_namespace() -> None:
    term = parse_term({"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": POOL}, "team")
    assert term.namespaces == frozenset({"team"})
    assert term.namespace_selector is None
    assert term.matches_namespace("team", {})
    assert not term.matches_namespace("other", {})


def test_empty_namespace_selector_means_all_namespaces() -> None:
    term = parse_term({"labelSelector": {}, "topologyKey": POOL, "namespaceSelector": {}}, "team")
    assert term.matches_namespace("anything", {})


def test_namespace_selector_reads_namespace_labels() -> None:
    term = parse_term(
        {"labelSelector": {}, "topologyKey": POOL, "namespaceSelector": {"matchLabels": {"tier": "ml"}}},
        "team",
    )
    assert term.matches_namespace("x", {"x": {"tier": "ml"}})
    assert not term.matches_namespace("y", {"y": {"tier": "web"}})


@pytest.mark.parametrize(
    ("term", "message"),
    [
        ({"labelSelector": {}}, "topologyKey is required"),
        (
            {"topologyKey": POOL, "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}},
            "Near",
        ),
    ],
)
def test_malformed_terms_are_clear_errors(term: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_term(term, "default")


def test_affinity_and_anti_affinity_answers_follow_pod_placement() -> None:
    index = _index()
    affinity, anti = _exclusive_terms("job-1")
    own = parse_term(affinity, "default")
    others = parse_term(anti, "default")
    assert not _anywhere(index, own)
    index.add_pod("default/leader-1", "n1", "default", {KEY: "job-1"}, [others])
    assert _has(index, own, "a")
    assert not _has(index, own, "b")
    assert _anywhere(index, own)
    # a different job's anti-affinity term sees job-1 in pool a only
    other_anti = parse_term(_exclusive_terms("job-2")[1], "default")
    assert _has(index, other_anti, "a")
    assert not _has(index, other_anti, "b")
    # and job-1's own anti-affinity term does not match itself
    assert not _has(index, others, "a")
    index.remove_pod("default/leader-1")
    assert not _has(index, own, "a")
    assert not _anywhere(index, own)


def test_symmetry_existing_anti_affinity_forbids_its_domain_for_matching_pods() -> None:
    index = _index()
    anti = parse_term(_exclusive_terms("job-1")[1], "default")
    index.add_pod("default/leader-1", "n3", "default", {KEY: "job-1"}, [anti])
    forbidden, evaluated = index.forbidden_by_existing("default", {KEY: "job-2"})
    assert forbidden == {POOL: {"b"}}
    assert evaluated == 1
    assert index.forbidden_by_existing("default", {KEY: "job-1"})[0] == {}
    assert index.forbidden_by_existing("default", {"unrelated": "x"})[0] == {}
    index.remove_pod("default/leader-1")
    assert index.forbidden_by_existing("default", {KEY: "job-2"})[0] == {}


@pytest.mark.parametrize("incoming", ["job-1", "job-2", "job-3", None])
def test_symmetry_per_domain_agrees_with_matching_every_placed_term(incoming: str | None) -> None:
    """AffinityCheck answers symmetry from the terms placed in each domain it visits; the answer is the one
    `forbidden_by_existing` (every placed term matched up front) gives, and removed pods leave no term."""
    index = _index()
    placements = (
        ("default/l1", "n1", "job-1"),
        ("default/l2", "n3", "job-2"),
        ("default/l2b", "n2", "job-2"),
    )
    for key, node, job in placements:
        index.add_pod(key, node, "default", {KEY: job}, [parse_term(_exclusive_terms(job)[1], "default")])
    labels = {KEY: incoming} if incoming else {"unrelated": "x"}
    forbidden, _ = index.forbidden_by_existing("default", labels)
    check = AffinityCheck(index, "default", labels, [], [])
    for pool in ("a", "b", "c"):
        expected = REASON_EXISTING_ANTI_AFFINITY if pool in forbidden.get(POOL, set()) else None
        assert check.reason({POOL: pool}) == expected, pool
    assert check.skip == (not forbidden)
    for key, _node, _job in placements:
        index.remove_pod(key)
    assert index.anti_topology_keys() == ()
    assert list(index.anti_terms_at(POOL, "a")) == []


def test_identical_existing_terms_are_grouped() -> None:
    index = _index()
    anti = parse_term(_exclusive_terms("job-1")[1], "default")
    for number, node in enumerate(("n1", "n2", "n3")):
        index.add_pod(f"default/p{number}", node, "default", {KEY: "job-1"}, [anti])
    forbidden, evaluated = index.forbidden_by_existing("default", {KEY: "job-9"})
    assert evaluated == 1
    assert forbidden == {POOL: {"a", "b"}}


def test_terms_respect_namespaces() -> None:
    index = _index()
    index.namespace_labels = {"team-a": {"tier": "ml"}, "team-b": {}}
    index.add_pod("team-a/p", "n1", "team-a", {KEY: "job-1"}, [])
    same_namespace_only = parse_term(_exclusive_terms("job-1")[0], "team-b")
    assert not _has(index, same_namespace_only, "a")
    everywhere = parse_term(_exclusive_terms("job-1", namespace_selector={})[0], "team-b")
    assert _has(index, everywhere, "a")
    by_label = parse_term(
        _exclusive_terms("job-1", namespace_selector={"matchLabels": {"tier": "ml"}})[0], "x"
    )
    assert _has(index, by_label, "a")


def test_multi_key_selectors_fall_back_to_visiting_pods() -> None:
    index = _index()
    index.add_pod("default/p", "n4", "default", {"app": "db", "role": "primary"}, [])
    term = parse_term(
        {"labelSelector": {"matchLabels": {"app": "db", "role": "primary"}}, "topologyKey": POOL}, "default"
    )
    wrong = parse_term(
        {"labelSelector": {"matchLabels": {"app": "db", "role": "replica"}}, "topologyKey": POOL}, "default"
    )
    assert _has(index, term, "c")
    assert not _has(index, wrong, "c")


def test_does_not_exist_counts_pods_without_the_label() -> None:
    index = _index()
    index.add_pod("default/p", "n3", "default", {"other": "x"}, [])
    term = parse_term(
        {
            "labelSelector": {"matchExpressions": [{"key": KEY, "operator": "DoesNotExist"}]},
            "topologyKey": POOL,
        },
        "default",
    )
    assert _has(index, term, "b")
    assert not _has(index, term, "a")


def test_a_topology_key_tracked_late_counts_pods_placed_before() -> None:
    index = _index()
    index.add_pod("default/p", "n2", "default", {KEY: "job-1"}, [])
    by_host = parse_term(
        {"labelSelector": {"matchLabels": {KEY: "job-1"}}, "topologyKey": "kubernetes.io/hostname"}, "default"
    )
    assert _has(index, by_host, "n2")
    assert not _has(index, by_host, "n1")


def test_node_relabel_moves_its_pods_to_the_new_domain() -> None:
    index = _index()
    term = parse_term(_exclusive_terms("job-1")[0], "default")
    index.add_pod("default/p", "n4", "default", {KEY: "job-1"}, [])
    assert _has(index, term, "c")
    index.set_node("n4", {POOL: "d"})
    assert not _has(index, term, "c")
    assert _has(index, term, "d")


def test_required_terms_reads_the_pod_spec() -> None:
    affinity, anti = _exclusive_terms("j")
    pod = {
        "metadata": {"namespace": "ns"},
        "spec": {
            "affinity": {
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [affinity]},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [anti]},
            }
        },
    }
    (term,) = required_terms(pod, "podAffinity")
    assert isinstance(term, AffinityTerm)
    assert term.topology_key == POOL
    assert term.namespaces == frozenset({"ns"})
    assert len(required_terms(pod, "podAntiAffinity")) == 1
    assert required_terms({"spec": {}}, "podAffinity") == []
