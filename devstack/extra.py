"""devstack and bench run from a checkout, with the tools' requirements (requirements-tools.txt) on top of
the product's: the wheel carries neither them nor their dependencies.

Each package checks for the modules it needs on import, so a missing requirement fails with one clear line
naming the install command instead of an ImportError deep in a Helm or plotting import.
"""

from __future__ import annotations

from importlib.util import find_spec

DISTRIBUTIONS = {
    "yaml": "PyYAML",
    "helm_python": "helm-python-sdk",
    "matplotlib": "matplotlib",
}
"""Module → the distribution of requirements-tools.txt that provides it."""


def _installed(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        return False


class ToolRequirementsMissing(ImportError):
    """A module of requirements-tools.txt is not installed."""


def require_tools(user: str, *modules: str) -> None:
    missing = [DISTRIBUTIONS[module] for module in modules if not _installed(module)]
    if missing:
        raise ToolRequirementsMissing(
            f"{user} needs the tools' requirements, which are not installed (missing: {', '.join(missing)}): "
            "pip install -r requirements-tools.txt in the checkout (make venv does)"
        )
