"""`python -m resizer --help`."""

from __future__ import annotations

import sys

from kubekit.process import run_main
from resizer.app import run
from resizer.settings import load_settings


def main(argv: list[str] | None = None) -> int:
    return run_main(load_settings, run, argv)


if __name__ == "__main__":
    sys.exit(main())
