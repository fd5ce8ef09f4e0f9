"""The real admission app (routes, handlers, placement core) over ASGI, with a settable fake leader source."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI

from placement.admission import LeaderState, LeaderStatus, PodPlan
from placement.constants import DEFAULT_STRATEGY, Strategy
from placement.jobset import JobSetRef, JobSetStartup, OwnerJobSet
from webhook.app import create_app
from webhook.handlers import Admission
from webhook.metrics import Metrics

BOUND = LeaderState(LeaderStatus.BOUND, leader_name="lead-0", node_name="node-1", domain="pool-a")
LEADER_STATES: tuple[LeaderState | None, ...] = (
    BOUND,
    LeaderState(LeaderStatus.NOT_FOUND),
    LeaderState(LeaderStatus.NOT_SCHEDULED, leader_name="lead-0"),
    LeaderState(LeaderStatus.NODE_MISSING, leader_name="lead-0", node_name="node-1"),
    LeaderState(LeaderStatus.NODE_WITHOUT_DOMAIN, leader_name="lead-0", node_name="node-1"),
    None,  # the lookup raises (API server unreachable)
)


class LookupFailed(RuntimeError):
    pass


@dataclass
class SettableLeaders:
    """A LeaderSource whose answer the test sets; None makes the lookup raise."""

    state: LeaderState | None = BOUND
    lookups: list[PodPlan] = field(default_factory=list)

    def ready(self) -> bool:
        return True

    async def leader_state(self, plan: PodPlan) -> LeaderState:
        self.lookups.append(plan)
        if self.state is None:
            raise LookupFailed("injected: API server unreachable")
        return self.state


class UnorderedJobSets:
    """A JobSetSource: every owning JobSet starts its replicated Jobs in any order."""

    async def startup(self, ref: JobSetRef) -> OwnerJobSet:
        return JobSetStartup()


def admission_app(leaders: SettableLeaders, strategy: str = DEFAULT_STRATEGY) -> FastAPI:
    admission = Admission(Strategy(strategy), leaders, UnorderedJobSets())
    return create_app(admission, leaders, Metrics(), tls_loaded=lambda: True)


def response_patch(review: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The decoded JSONPatch of a response, or None when it carries none."""
    response = review["response"]
    if "patch" not in response:
        return None
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"], validate=True))
    return ops
