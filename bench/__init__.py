"""Benchmarks: `python -m bench strategies|webhook|resizer|soak` (see `python -m bench --help`).

Runs from a checkout with requirements-tools.txt installed (the strategies run through devstack)."""

from devstack.extra import require_tools

require_tools("bench", "matplotlib")
