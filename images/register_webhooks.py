"""One-shot for docker-compose: register the Helm chart's webhook configurations in kubesim.

The same step `devstack.Stack.register_webhooks` performs for `make run`: render the chart, point every
webhook's clientConfig at the local webhook URL with the dev CA, create or replace the configurations.

    python images/register_webhooks.py --server http://127.0.0.1:6443 \
        --webhook-url https://127.0.0.1:9443 --ca-file /var/lib/exclusive-placement/certs/ca.crt
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from certs.files import ca_bundle_b64
from devstack.kube import KubeClient, KubeError
from devstack.webhooks import ChartError, local_webhook_configurations
from placement.constants import DEFAULT_STRATEGY, STRATEGIES


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="register_webhooks", description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True, help="kubesim URL, e.g. http://127.0.0.1:6443")
    parser.add_argument(
        "--webhook-url", required=True, help="base URL of the webhook, e.g. https://127.0.0.1:9443"
    )
    parser.add_argument(
        "--ca-file", type=Path, required=True, help="PEM CA that signed the webhook's certificate"
    )
    parser.add_argument("--default-strategy", choices=STRATEGIES, default=DEFAULT_STRATEGY)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        configurations = local_webhook_configurations(
            args.webhook_url, ca_bundle_b64(args.ca_file), args.default_strategy
        )
        with KubeClient(args.server) as client:
            for configuration in configurations:
                client.create_or_replace(configuration)
                print(f"registered {configuration['kind']}/{configuration['metadata']['name']}", flush=True)
    except (ChartError, KubeError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
