"""`python -m webhook --help`."""

from __future__ import annotations

import sys

from kubekit.process import run_main
from kubekit.settings import SettingsError
from webhook.server import serve
from webhook.settings import WebhookSettings, load_settings


def run(settings: WebhookSettings) -> int:
    if settings.cert_dir is not None and not settings.cert_dir.is_dir():
        raise SettingsError(f"--cert-dir {settings.cert_dir} is not a directory")
    serve(settings)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_main(load_settings, run, argv)


if __name__ == "__main__":
    sys.exit(main())
