"""How both binaries start: settings or exit 2, the shared log format, then run; a configuration that
turns out unusable only at start (no cluster to reach, a missing directory) also exits 2 with one line."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

from kubekit.client import ClusterConfigError
from kubekit.logs import configure_logging
from kubekit.settings import ProcessSettings, SettingsError

S = TypeVar("S", bound=ProcessSettings)
USAGE_ERROR = 2


def run_main(load: Callable[[Sequence[str]], S], run: Callable[[S], int], argv: Sequence[str] | None) -> int:
    """`load(argv)` (the process's own arguments when None), configure logging, `run(settings)`."""
    try:
        settings = load(sys.argv[1:] if argv is None else argv)
    except SettingsError as error:
        print(f"error: {error}", file=sys.stderr)
        return USAGE_ERROR
    configure_logging(settings.log_format, settings.log_level)
    try:
        return run(settings)
    except (SettingsError, ClusterConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return USAGE_ERROR
