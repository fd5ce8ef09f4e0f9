"""Where benchmark results go. A run writes to `.bench/` (outside git) unless told otherwise: the committed
`bench/results/` are rewritten only on purpose, by the `make bench*` targets (`--out bench/results`)."""

from __future__ import annotations

from pathlib import Path

SCRATCH = Path(".bench")
"""The default `--out` of every benchmark (relative to where it runs; ignored by git)."""
