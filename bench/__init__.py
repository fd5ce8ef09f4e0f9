"""Benchmarks: `python -m bench strategies|webhook|resizer|soak` (see `python -m bench --help`)."""
