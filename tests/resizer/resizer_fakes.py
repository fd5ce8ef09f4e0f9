"""Test doubles of the resizer's own collaborators that are not the API server (that is
`tests.support.fake_api.FakeKubeApi`): a clock the test moves, a recorder that keeps what it was told."""

from __future__ import annotations

from resizer.recorder import Outcome


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Recording:
    """A recorder that keeps what the reconcilers reported, in order."""

    def __init__(self) -> None:
        self.outcomes: list[Outcome] = []

    def record(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
