"""Benchmarks: `python -m bench strategies|webhook|resizer|soak` (see `python -m bench --help`).

Needs the `sim` extra and a checkout (the strategies run on kubesim through devstack)."""

from kubesim.extra import require_sim_extra

require_sim_extra("bench", "matplotlib")
