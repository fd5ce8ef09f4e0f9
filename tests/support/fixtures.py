"""pytest fixtures more than one area of tests uses (each area's conftest.py imports the ones it needs)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.fake_api import FakeKubeApi


@pytest.fixture
def fake_api() -> Iterator[FakeKubeApi]:
    """A fake API server over real HTTP on a free port (`tests.support.fake_api.FakeKubeApi`), closed
    after the test."""
    with FakeKubeApi() as api:
        yield api
