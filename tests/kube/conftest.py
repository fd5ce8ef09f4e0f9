"""The kube tier: the whole stack on the real control plane built by `make kube`.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok's fake nodes and JobSet's real controller
and webhooks, with this project's webhook and resizer as real processes under the chart's ServiceAccounts
and RBAC. A cluster takes about 15 s to start, so each test module shares one (`kube_stack`, kept on one
xdist worker by its `xdist_group`), and each test works in a namespace of its own (`namespace`), emptied
before the next test starts so that every node pool is free again. `kube_stack_factory` starts a stack of
another shape for one test.

These tests never skip themselves: `make test` builds the control plane first (`make kube`), and without it
they fail with the message that names the make target.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest

from devstack.commands import KubesimFlags
from devstack.kube import KubeError
from devstack.stack import Stack, StackOptions
from tests.kube.kube_support import empty_namespace
from tests.support.waiting import eventually

KUBE_CLUSTER = KubesimFlags(nodes=8, pools=4, gpus_per_node=8)
"""4 pools of 2 eight-GPU nodes: room for 4 exclusive Jobs of up to 16 one-GPU pods (kubesim's e2e shape)."""
STARTUP_SECONDS = 120.0


def kube_options(workdir: Path, **overrides: object) -> StackOptions:
    fields: dict[str, object] = {
        "control_plane": "kube",
        "cluster": KUBE_CLUSTER,
        "workdir": workdir,
        "startup_timeout": STARTUP_SECONDS,
    }
    fields.update(overrides)
    return StackOptions(**fields)  # type: ignore[arg-type]


def started(options: StackOptions) -> Stack:
    stack = Stack(options)
    try:
        stack.start()
    except BaseException:
        stack.stop()
        raise
    return stack


@pytest.fixture(scope="module")
def kube_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    stack = started(kube_options(tmp_path_factory.mktemp("kube-stack")))
    yield stack
    stack.stop()


class KubeStackFactory(Protocol):
    def __call__(self, **overrides: object) -> Stack: ...


@pytest.fixture
def kube_stack_factory(tmp_path: Path) -> Iterator[KubeStackFactory]:
    stacks: list[Stack] = []

    def make(**overrides: object) -> Stack:
        stack = started(kube_options(tmp_path / f"stack-{len(stacks)}", **overrides))
        stacks.append(stack)
        return stack

    yield make
    for stack in reversed(stacks):
        stack.stop()


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own on the module's stack; emptied (every pod gone) afterwards."""
    stack: Stack = request.getfixturevalue("kube_stack")
    readable = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].rstrip("-")
    name = f"{readable}-{hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:8]}"
    stack.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    eventually(
        lambda: stack.client.get("ServiceAccount", "default", namespace=name),
        f"the default ServiceAccount of {name}",
        30,
        ignoring=(KubeError,),
    )
    yield name
    empty_namespace(stack, name)
