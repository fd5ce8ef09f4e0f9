"""API errors, shaped exactly like the real API server's `Status` bodies (kubectl prints `message`)."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An API failure: HTTP status code, machine-readable reason and a human message."""

    def __init__(self, status: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.details = details or {}

    def to_status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.status,
        }
        if self.reason:
            body["reason"] = self.reason
        if self.details:
            body["details"] = self.details
        return body

    def __repr__(self) -> str:
        return f"ApiError({self.status}, {self.reason!r}, {self.message!r})"


def qualified(resource: str, group: str) -> str:
    """`pods` for the core group, `jobs.batch` otherwise (how the API server names a resource in messages)."""
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{qualified(resource, group)} "{name}" not found',
        {"name": name, "group": group, "kind": resource} if group else {"name": name, "kind": resource},
    )


def already_exists(resource: str, name: str, group: str = "") -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(resource, group)} "{name}" already exists',
        {"name": name, "group": group, "kind": resource} if group else {"name": name, "kind": resource},
    )


def conflict(resource: str, name: str, group: str = "", why: str | None = None) -> ApiError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {why}',
        {"name": name, "group": group, "kind": resource} if group else {"name": name, "kind": resource},
    )


_CAUSE_TYPES = (
    ("Invalid value", "FieldValueInvalid"),
    ("Required value", "FieldValueRequired"),
    ("Unsupported value", "FieldValueNotSupported"),
    ("Duplicate value", "FieldValueDuplicate"),
    ("Forbidden", "FieldValueForbidden"),
    ("Too long", "FieldValueTooLong"),
    ("Too many", "FieldValueTooMany"),
    ("Not found", "FieldValueNotFound"),
)


def cause_type(message: str) -> str:
    """A cause's `reason`: the field.ErrorType its message starts with (FieldValueInvalid by default)."""
    for prefix, kind in _CAUSE_TYPES:
        if message.startswith(prefix):
            return kind
    return "FieldValueInvalid"


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 Invalid as apierrors.NewInvalid writes it. `causes` are (field, message) pairs, e.g.
    ("spec.completions", "Invalid value: 3: field is immutable"); each becomes a `details.causes` entry (all
    of them, repeats included), while the message lists each distinct text once, in brackets when there
    are several (field.ErrorList.ToAggregate)."""
    qualified_kind = f"{kind}.{group}" if group else kind
    texts = list(dict.fromkeys(f"{field}: {message}" for field, message in causes))
    text = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    details: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "causes": [
            {"reason": cause_type(message), "message": message, "field": field} for field, message in causes
        ],
    }
    if group:
        details["group"] = group
    return ApiError(422, "Invalid", f'{qualified_kind} "{name}" is invalid: {text}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, "
        f"application/strategic-merge-patch+json (got {content_type!r})",
    )


def gone(requested: str, oldest: int) -> ApiError:
    return ApiError(410, "Expired", f"too old resource version: {requested} ({oldest})")


def internal(message: str, cause: str | None = None) -> ApiError:
    details = {"causes": [{"message": cause}]} if cause else None
    return ApiError(500, "InternalError", f"Internal error occurred: {message}", details)


def too_many_requests(retry_after_seconds: int) -> ApiError:
    return ApiError(
        429,
        "TooManyRequests",
        "the server has received too many requests and has asked us to try again later",
        {"retryAfterSeconds": retry_after_seconds},
    )
