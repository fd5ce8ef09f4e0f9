import asyncio

import pytest

from tests.kubesim.controllers.ctrl_harness import Run


@pytest.fixture
def run() -> Run:
    """Run one coroutine on a fresh event loop (the suite has no asyncio plugin)."""
    return asyncio.run
