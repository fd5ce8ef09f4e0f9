"""Run the whole system locally: the real control plane + webhook + resizer as separate processes
(`python -m devstack`).

Library: `Stack` / `StackOptions` (devstack.stack), shaped by `ClusterShape` (devstack.shape), for
end-to-end tests and benchmarks; the command lines of every component live in `devstack.commands`; its
client is kubekit's (`Stack.client`: `kubekit.generic.GenericClient` with `devstack.kinds`). Runs
from a checkout (it renders charts/ and applies examples/) with requirements-tools.txt installed.
"""

from devstack.extra import require_tools
from devstack.shape import ClusterShape
from devstack.stack import Stack, StackOptions

require_tools("devstack", "helm_python", "yaml")

__all__ = ["ClusterShape", "Stack", "StackOptions"]
