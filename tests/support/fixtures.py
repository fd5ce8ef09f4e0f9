"""pytest fixtures more than one area of tests uses (each area's conftest.py imports the ones it needs)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubekit.client import Kube, Timeouts, build_api_client
from tests.support.fake_api import FakeKubeApi


@pytest.fixture
def fake_api() -> Iterator[FakeKubeApi]:
    """A fake API server over real HTTP on a free port (`tests.support.fake_api.FakeKubeApi`), closed
    after the test."""
    with FakeKubeApi() as api:
        yield api


def kube_of(api: FakeKubeApi, timeouts: Timeouts | None = None) -> Kube:
    """The binaries' client (`kubekit.client.Kube`) pointed at `api`; the default timeouts only bound how
    long a broken test hangs (the fake answers at once unless a test holds a request)."""
    return Kube(build_api_client(None, api.url, user_agent="test"), timeouts or Timeouts(connect=5, read=10))


@pytest.fixture
def kube(fake_api: FakeKubeApi) -> Iterator[Kube]:
    """`kube_of(fake_api)`, closed after the test."""
    client = kube_of(fake_api)
    yield client
    client.close()
