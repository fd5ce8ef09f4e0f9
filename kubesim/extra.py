"""kubesim, devstack and bench need the `sim` extra, which `pip install .` (the product alone) leaves out.

Each package checks for the modules it needs on import, so a missing extra fails with one clear line
naming the install command instead of an ImportError deep in a CEL or Helm import.
"""

from __future__ import annotations

from importlib.util import find_spec

DISTRIBUTIONS = {
    "celpy": "cel-python",
    "lark": "lark",
    "google.protobuf": "protobuf",
    "yaml": "PyYAML",
    "helm_python": "helm-python-sdk",
    "matplotlib": "matplotlib",
}
"""Module → the distribution of the `sim` extra that provides it."""


def _installed(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        return False


class SimExtraMissing(ImportError):
    """A module of the `sim` extra is not installed."""


def require_sim_extra(user: str, *modules: str) -> None:
    missing = [DISTRIBUTIONS[module] for module in modules if not _installed(module)]
    if missing:
        raise SimExtraMissing(
            f"{user} needs the `sim` extra, which is not installed (missing: {', '.join(missing)}): "
            "pip install 'exclusive-placement[sim]' (or, in a checkout, pip install -r requirements-sim.txt)"
        )
