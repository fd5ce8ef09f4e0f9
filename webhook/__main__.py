"""`python -m webhook --help`."""

from __future__ import annotations

import sys

from kubekit.client import ClusterConfigError
from kubekit.logs import configure_logging
from kubekit.settings import SettingsError
from webhook.server import serve
from webhook.settings import load_settings


def main(argv: list[str] | None = None) -> int:
    try:
        settings = load_settings(sys.argv[1:] if argv is None else argv)
    except SettingsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if settings.cert_dir is not None and not settings.cert_dir.is_dir():
        print(f"error: --cert-dir {settings.cert_dir} is not a directory", file=sys.stderr)
        return 2
    configure_logging(settings.log_format, settings.log_level)
    try:
        serve(settings)
    except ClusterConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
