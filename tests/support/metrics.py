"""Reading metrics in tests, one way each: a component's registry in this process (`sample`), a process's
`/metrics` page (`bench.measures.metric_value`, summed over the label sets asked for), a resizer of a
devstack `Stack` (`resizer_metric`)."""

from __future__ import annotations

import httpx
from prometheus_client import CollectorRegistry

from bench.measures import metric_value
from devstack.stack import Stack

RESIZER_PREFIX = "exclusive_placement_resizer"


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    """The sample `name` with exactly `labels` in `registry`; 0 when it was never set."""
    return registry.get_sample_value(name, labels) or 0.0


def scraped(url: str, name: str, **labels: str) -> float:
    """The samples `name` (whose labels include `labels`) on the `/metrics` page at `url`, summed."""
    return metric_value(httpx.get(url, timeout=5).text, name, labels)


def resizer_metric(stack: Stack, name: str, replica: int = 0, **labels: str) -> float:
    """`exclusive_placement_resizer_<name>` of the stack's resizer `replica`, summed over its labels."""
    url = stack.resizer_readyz(replica).replace("/readyz", "/metrics")
    return scraped(url, f"{RESIZER_PREFIX}_{name}", **labels)
