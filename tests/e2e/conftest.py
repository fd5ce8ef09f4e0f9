"""Shared end-to-end fixtures: whole stacks (kubesim + webhook + resizer as real processes) on free ports.

    def test_something(stack: Stack) -> None:            # 8 nodes in 4 pools, elastic, one resizer
        stack.client.create(exclusive_jobset("train", jobs=4, pods_per_job=4))   # devstack.manifests
        wait_until_placed(stack, "default", jobs=4, timeout=60)

    def test_ha(stack_factory: StackFactory) -> None:    # any shape / strategy / replica count
        stack = stack_factory(resizer_replicas=2, cluster=KubesimFlags(nodes=16, pools=4, time_scale=0.05))

Every stack is stopped at teardown (process groups killed, ports freed), its logs kept under tmp_path.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest

from devstack.commands import KubesimFlags
from devstack.stack import Stack, StackOptions

SMALL_CLUSTER = KubesimFlags(nodes=8, pools=4, gpus_per_node=8, time_scale=0.05)
"""4 pools of 2 eight-GPU nodes: room for 4 exclusive Jobs of up to 16 one-GPU pods."""


class StackFactory(Protocol):
    def __call__(
        self,
        *,
        cluster: KubesimFlags = ...,
        default_strategy: str = ...,
        resizer_replicas: int = ...,
        jobset_takeover: bool = ...,
    ) -> Stack: ...


@pytest.fixture
def stack_factory(tmp_path: Path) -> Iterator[StackFactory]:
    with contextlib.ExitStack() as stacks:  # each started stack stopped at teardown, the last first
        made = itertools.count()

        def make(
            *,
            cluster: KubesimFlags = SMALL_CLUSTER,
            default_strategy: str = "elastic",
            resizer_replicas: int = 1,
            jobset_takeover: bool = True,
        ) -> Stack:
            options = StackOptions(
                cluster=cluster,
                default_strategy=default_strategy,
                resizer_replicas=resizer_replicas,
                jobset_takeover=jobset_takeover,
                workdir=tmp_path / f"stack-{next(made)}",
                startup_timeout=90,
            )
            return stacks.enter_context(Stack(options))  # a stack that fails to start is stopped at once

        yield make


@pytest.fixture
def stack(stack_factory: StackFactory) -> Stack:
    return stack_factory()
