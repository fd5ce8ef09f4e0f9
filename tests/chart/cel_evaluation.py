"""Evaluate the chart's CEL expressions with a CEL interpreter (cel-python), as the API server would."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import celpy
from celpy.adapter import json_to_cel
from celpy.celtypes import BoolType, MapType, StringType
from celpy.evaluation import CELEvalError


def all_true(
    expressions: Iterable[str], variables: dict[str, Any], *, composed: Sequence[tuple[str, str]] = ()
) -> bool:
    """Every expression true for the given JSON variables (`object`, `oldObject`, `request`, ...).

    `composed`: a policy's `spec.variables` as (name, expression), in order, each seen by the later ones and
    by the expressions as `variables.<name>`. The API server evaluates them lazily; here each is evaluated
    first and one that fails is kept as its error, which an expression then meets only if it reads it
    (as with the API server, where a guard like `request.operation != 'UPDATE' || ...` never reads it)."""
    env = celpy.Environment()
    activation = {name: json_to_cel(value) for name, value in variables.items()}
    if composed:
        values: dict[str, Any] = {}
        for name, expression in composed:
            activation["variables"] = MapType(values)
            try:
                values[StringType(name)] = env.program(env.compile(expression)).evaluate(activation)
            except CELEvalError as error:
                values[StringType(name)] = error
        activation["variables"] = MapType(values)
    return all(
        _truth(env.program(env.compile(expression)).evaluate(activation)) for expression in expressions
    )


def _truth(result: Any) -> bool:
    """The expression's boolean; an error (which cel-python may return rather than raise, and which is
    truthy) fails the test, as the API server's failurePolicy would act on it."""
    if not isinstance(result, BoolType):
        raise AssertionError(f"the expression did not evaluate to a boolean: {result!r}")
    return bool(result)
