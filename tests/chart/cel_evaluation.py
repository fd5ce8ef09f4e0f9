"""Evaluate the chart's CEL expressions with a CEL interpreter (cel-python), as the API server would."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import celpy
from celpy.adapter import json_to_cel


def all_true(expressions: Iterable[str], variables: dict[str, Any]) -> bool:
    """Every expression true for the given JSON variables (`object`, `oldObject`, `request`, ...)."""
    env = celpy.Environment()
    activation = {name: json_to_cel(value) for name, value in variables.items()}
    return all(bool(env.program(env.compile(expression)).evaluate(activation)) for expression in expressions)
