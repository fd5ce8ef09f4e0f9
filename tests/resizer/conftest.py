"""Pytest fixtures of the resizer tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.resizer.resizer_world import MakeWorld, World
from tests.support.fixtures import fake_api, kube

__all__ = ["fake_api", "kube", "make_world"]


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
