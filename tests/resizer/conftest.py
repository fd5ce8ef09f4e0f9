"""Pytest fixtures of the resizer tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.resizer.resizer_world import MakeWorld, World


@pytest.fixture
def make_world() -> Iterator[MakeWorld]:
    """`World(**options)`, its informers stopped after the test."""
    worlds: list[World] = []

    def make(**options: Any) -> World:
        worlds.append(World(**options))
        return worlds[-1]

    yield make
    for world in worlds:
        world.close()
