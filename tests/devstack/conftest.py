"""Pytest fixtures of the devstack tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubekit.generic import GenericClient
from tests.support.fake_api import FakeKubeApi
from tests.support.fixtures import fake_api

__all__ = ["cluster", "fake_api"]


@pytest.fixture
def cluster(fake_api: FakeKubeApi) -> Iterator[GenericClient]:
    """The tools' client of the fake API server, as devstack's stack holds it (`stack.client`)."""
    with GenericClient.connect(fake_api.url, timeout=5.0) as client:
        yield client
