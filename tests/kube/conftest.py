"""The kube tier: the whole stack on the real control plane built by `make kube`.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok's fake nodes and JobSet's real controller
and webhooks, with this project's webhook and resizer as real processes under the chart's ServiceAccounts
and RBAC. A cluster takes about 15 s to start, so each test module shares one (`kube_stack`, kept on one
xdist worker by its `xdist_group`), and each test works in a namespace of its own (`namespace`), emptied
before the next test starts so that every node pool is free again. `kube_stack_factory` starts a stack of
another shape for one test. A module whose tests must hold on both paths of pod admission (the chart's
policies, the default, and the pod webhook) overrides `kube_stack` with `stack_on_each_path`.

These tests never skip themselves: `make test` builds the control plane first (`make kube`), and without it
they fail with the message that names the make target.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest

from devstack.shape import ClusterShape
from devstack.stack import Stack, StackOptions
from tests.kube.kube_support import create_namespace, empty_namespace

KUBE_CLUSTER = ClusterShape(nodes=8, pools=4, gpus_per_node=8)
"""4 pools of 2 eight-GPU nodes: room for 4 exclusive Jobs of up to 16 one-GPU pods."""
STARTUP_SECONDS = 120.0


def kube_options(workdir: Path, **overrides: object) -> StackOptions:
    fields: dict[str, object] = {
        "cluster": KUBE_CLUSTER,
        "workdir": workdir,
        "startup_timeout": STARTUP_SECONDS,
    }
    fields.update(overrides)
    return StackOptions(**fields)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def kube_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with Stack(kube_options(tmp_path_factory.mktemp("kube-stack"))) as stack:
        yield stack


def stack_on_each_path(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """The body of a module's own `kube_stack`, parametrized by path (`request.param`):

    @pytest.fixture(scope="module", params=POD_ADMISSION_PATHS)
    def kube_stack(request, tmp_path_factory): yield from stack_on_each_path(request, tmp_path_factory)
    """
    path = str(request.param)
    with Stack(kube_options(tmp_path_factory.mktemp(f"kube-stack-{path}"), pod_admission=path)) as stack:
        yield stack


class KubeStackFactory(Protocol):
    def __call__(self, **overrides: object) -> Stack: ...


@pytest.fixture
def kube_stack_factory(tmp_path: Path) -> Iterator[KubeStackFactory]:
    with contextlib.ExitStack() as stacks:  # each started stack stopped at teardown, the last first
        made = itertools.count()

        def make(**overrides: object) -> Stack:
            return stacks.enter_context(Stack(kube_options(tmp_path / f"stack-{next(made)}", **overrides)))

        yield make


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own on the module's stack; emptied (every pod gone) afterwards."""
    stack: Stack = request.getfixturevalue("kube_stack")
    readable = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].rstrip("-")
    name = f"{readable}-{hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:8]}"
    create_namespace(stack, name)
    yield name
    empty_namespace(stack, name)
