"""`python -m resizer --help`."""

from __future__ import annotations

import sys

from kubekit.client import ClusterConfigError
from kubekit.logs import configure_logging
from kubekit.settings import SettingsError
from resizer.app import run
from resizer.settings import load_settings


def main(argv: list[str] | None = None) -> int:
    try:
        settings = load_settings(sys.argv[1:] if argv is None else argv)
    except SettingsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    configure_logging(settings.log_format, settings.log_level)
    try:
        return run(settings)
    except ClusterConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
