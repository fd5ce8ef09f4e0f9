"""Field errors worded like k8s.io/apimachinery/pkg/util/validation/field (errors.go, `Error.ErrorBody`).

Each constructor returns a (field path, message) cause: `spec.completions`, `Invalid value: 4: field is
immutable`. `kubesim.errors.invalid` turns a list of them into the 422 `Status`.

Bad values print as Go prints them for the simple types (numbers and booleans bare, strings quoted, a nil
pointer as `null`). **Deviation:** Go prints structs and maps with `%#v` (type names and pointer
addresses); kubesim prints them as compact JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

Cause = tuple[str, str]

FIELD_IMMUTABLE = "field is immutable"
"""apimachinery validation.FieldImmutableErrorMsg."""
IS_NEGATIVE = "must be greater than or equal to 0"
"""apimachinery validation.IsNegativeErrorMsg."""


def go_value(value: Any) -> str:
    """A bad value as `field.Error.ErrorBody` prints it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def invalid(path: str, value: Any, detail: str) -> Cause:
    return path, f"Invalid value: {go_value(value)}: {detail}"


def required(path: str, detail: str = "") -> Cause:
    return path, f"Required value: {detail}" if detail else "Required value"


def not_supported(path: str, value: Any, supported: Iterable[str]) -> Cause:
    quoted = ", ".join(json.dumps(item) for item in supported)
    return path, f"Unsupported value: {go_value(value)}: supported values: {quoted}"


def too_many(path: str, actual: int, maximum: int) -> Cause:
    return path, f"Too many: {actual}: must have at most {maximum} items"


def too_long(path: str, maximum: int) -> Cause:
    return path, f"Too long: may not be more than {maximum} bytes"


def non_negative(path: str, value: int) -> list[Cause]:
    """apivalidation.ValidateNonnegativeField."""
    return [invalid(path, value, IS_NEGATIVE)] if value < 0 else []


def immutable(path: str, new: Any, old: Any) -> list[Cause]:
    """apivalidation.ValidateImmutableField (semantic equality of the JSON values)."""
    return [invalid(path, new, FIELD_IMMUTABLE)] if new != old else []
