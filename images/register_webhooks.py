"""One-shot for docker-compose: register the Helm chart's webhook configurations in the cluster a
kubeconfig names.

The same step `devstack.Stack.register_webhooks` performs for `make run`: render the chart, point every
webhook's clientConfig at the local webhook URL with the dev CA, create or replace the configurations.
The kubeconfig is read by the official client, as the webhook and the resizer read theirs (inline or file
credentials, exec plugins).

    python images/register_webhooks.py --kubeconfig ~/.kube/config \
        --webhook-url https://127.0.0.1:9443 --ca-file /var/lib/exclusive-placement/certs/ca.crt
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kubernetes import client

from certs.files import ca_bundle_b64
from devstack.webhooks import ChartError, local_webhook_configurations
from kubekit.client import ClusterConfigError, build_api_client
from placement.constants import DEFAULT_STRATEGY, STRATEGIES


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="register_webhooks", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--kubeconfig", type=Path, required=True, help="kubeconfig of the cluster, with rights to register"
    )
    parser.add_argument(
        "--webhook-url", required=True, help="base URL of the webhook, e.g. https://127.0.0.1:9443"
    )
    parser.add_argument(
        "--ca-file", type=Path, required=True, help="PEM CA that signed the webhook's certificate"
    )
    parser.add_argument("--default-strategy", choices=STRATEGIES, default=DEFAULT_STRATEGY)
    return parser


def create_or_replace(api: client.AdmissionregistrationV1Api, configuration: dict[str, Any]) -> None:
    """Create the configuration; if it exists, replace it at its current resourceVersion."""
    mutating = configuration["kind"] == "MutatingWebhookConfiguration"
    create = (
        api.create_mutating_webhook_configuration if mutating else api.create_validating_webhook_configuration
    )
    read = api.read_mutating_webhook_configuration if mutating else api.read_validating_webhook_configuration
    replace = (
        api.replace_mutating_webhook_configuration
        if mutating
        else api.replace_validating_webhook_configuration
    )
    try:
        create(configuration)
    except client.ApiException as err:
        if err.status != 409:
            raise
        name = configuration["metadata"]["name"]
        current = read(name)
        body = {**configuration, "metadata": {**configuration["metadata"]}}
        body["metadata"]["resourceVersion"] = current.metadata.resource_version
        replace(name, body)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        configurations = local_webhook_configurations(
            args.webhook_url, ca_bundle_b64(args.ca_file), args.default_strategy
        )
        with build_api_client(args.kubeconfig, None, user_agent="register-webhooks") as api_client:
            api = client.AdmissionregistrationV1Api(api_client)
            for configuration in configurations:
                create_or_replace(api, configuration)
                print(f"registered {configuration['kind']}/{configuration['metadata']['name']}", flush=True)
    except client.ApiException as err:
        print(f"error: the API server answered {err.status} {err.reason}: {err.body}", file=sys.stderr)
        return 1
    except (ChartError, ClusterConfigError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
