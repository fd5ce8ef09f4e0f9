"""Run the whole system locally: kubesim + webhook + resizer as separate processes (`python -m devstack`).

Library: `Stack` / `StackOptions` (devstack.stack) for end-to-end tests and benchmarks; the command lines
of every component live in `devstack.commands` (docker-compose mirrors them). Needs the `sim` extra and a
checkout (it renders charts/ and applies examples/).
"""

from devstack.commands import KubesimFlags
from devstack.stack import Stack, StackOptions
from kubesim.extra import require_sim_extra

require_sim_extra("devstack", "helm_python", "yaml")

__all__ = ["KubesimFlags", "Stack", "StackOptions"]
