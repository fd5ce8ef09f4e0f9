"""Run the whole system locally: kubesim + webhook + resizer as separate processes (`python -m devstack`).

Library: `Stack` / `StackOptions` (devstack.stack) for end-to-end tests and benchmarks; the command lines
of every component live in `devstack.commands` (docker-compose mirrors them).
"""

from devstack.commands import KubesimFlags
from devstack.stack import Stack, StackOptions

__all__ = ["KubesimFlags", "Stack", "StackOptions"]
