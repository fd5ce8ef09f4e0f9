"""The flood's flow control (`bench.abuse_flood`): the tenants' priority level an operator would apply, and
its seats as kube-apiserver reports them."""

from __future__ import annotations

import pytest

from bench.abuse import main
from bench.abuse_flood import (
    ATTACKER,
    NOMINAL_SEATS,
    TENANT,
    TENANTS_LEVEL,
    VICTIM,
    seats_of,
    tenant_flow_control,
)


@pytest.mark.parametrize("shares", [1, 2])
def test_the_tenants_level_is_limited_to_its_shares_and_lends_nothing(shares: int) -> None:
    level, schema = tenant_flow_control(shares)
    limited = level["spec"]["limited"]
    assert (level["kind"], level["spec"]["type"]) == ("PriorityLevelConfiguration", "Limited")
    assert (limited["nominalConcurrencyShares"], limited["lendablePercent"]) == (shares, 0)
    assert limited["limitResponse"]["type"] == "Queue"
    assert schema["spec"]["priorityLevelConfiguration"] == {"name": TENANTS_LEVEL}
    assert schema["spec"]["distinguisherMethod"] == {"type": "ByUser"}  # one flow per tenant
    (rule,) = schema["spec"]["rules"]
    assert {s["serviceAccount"]["namespace"] for s in rule["subjects"]} == {ATTACKER, VICTIM}
    assert {s["serviceAccount"]["name"] for s in rule["subjects"]} == {TENANT}


def test_the_seats_are_read_per_priority_level() -> None:
    page = (
        f"# TYPE {NOMINAL_SEATS} gauge\n"
        f'{NOMINAL_SEATS}{{priority_level="workload-low"}} 245\n'
        f'{NOMINAL_SEATS}{{priority_level="{TENANTS_LEVEL}"}} 3\n'
    )
    assert seats_of(page, TENANTS_LEVEL) == 3
    assert seats_of(page, "absent") is None


def test_tenant_shares_below_one_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["--attack", "dry-run-flood", "--tenant-shares", "0"])
    assert refused.value.code == 2
    assert "--tenant-shares must be at least 1" in capsys.readouterr().err
