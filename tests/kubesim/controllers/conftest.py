import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest


@pytest.fixture
def run() -> Callable[[Coroutine[Any, Any, Any]], Any]:
    """Run one coroutine on a fresh event loop (the suite has no asyncio plugin)."""
    return asyncio.run
