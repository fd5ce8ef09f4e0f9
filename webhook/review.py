"""AdmissionReview v1 on the wire: typed shapes, strict parsing, and the response vocabulary.

`parse_review(body)` raises `BadReview` (→ HTTP 400) for anything that is not a usable review, including
JSON nested deeper than `MAX_JSON_DEPTH` (no Kubernetes object comes near it; the code after parsing, which
copies and diffs objects recursively, must never meet Python's recursion limit), and `ReviewOverLimit` (→ a
denial naming the field) for a pod spec whose scheduling constraints are beyond `webhook.limits`' bounds,
checked before the rest of the review is walked. Responses
are built only through `allowed`, `denied`, `patched`, `errored`; each echoes apiVersion, kind and uid.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Literal, NotRequired, TypedDict, cast

from placement.admission import Verdict
from placement.patch import JsonPatch
from webhook.body import containers
from webhook.limits import MAX_LIST_ITEMS, OverLimit, check_pod_spec

ADMISSION_API_VERSION = "admission.k8s.io/v1"
ADMISSION_KIND = "AdmissionReview"

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]


class GroupVersionKind(TypedDict):
    group: str
    version: str
    kind: str


class UserInfo(TypedDict):
    username: NotRequired[str]


class AdmissionRequest(TypedDict):
    uid: str
    kind: GroupVersionKind
    operation: Operation
    namespace: NotRequired[str]
    name: NotRequired[str]
    object: NotRequired[dict[str, Any] | None]
    oldObject: NotRequired[dict[str, Any] | None]
    dryRun: NotRequired[bool]
    userInfo: NotRequired[UserInfo]


class Status(TypedDict):
    code: int
    message: str
    reason: NotRequired[str]


class AdmissionResponse(TypedDict):
    uid: str
    allowed: bool
    status: NotRequired[Status]
    patch: NotRequired[str]
    patchType: NotRequired[Literal["JSONPatch"]]
    warnings: NotRequired[list[str]]


class AdmissionReview(TypedDict):
    apiVersion: str
    kind: str
    request: NotRequired[AdmissionRequest]
    response: NotRequired[AdmissionResponse]


class BadReview(ValueError):
    """The body is not a usable AdmissionReview request (a webhook error: HTTP 400)."""


class ReviewOverLimit(BadReview):
    """A well-formed review whose object asks far more work than any real one: denied (its uid is known)."""

    def __init__(self, uid: str, message: str) -> None:
        super().__init__(message)
        self.uid = uid


_OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
MAX_JSON_DEPTH = 100
"""A review of a Pod or Job nests about 12 levels deep (request.object.spec.affinity...values)."""
STRING_MAPS = (
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("spec", "template", "metadata", "labels"),
    ("spec", "template", "metadata", "annotations"),
)
"""Maps of strings in every object the webhook acts on (a Pod's or a Job's, and a Job's pod template's): the
API server decodes objects into typed structs before admission, so anything else is not its request."""


def _at(obj: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = obj
    for step in path:
        value = value.get(step) if isinstance(value, dict) else None
    return value


_STRING_OR_NONE = frozenset({str, type(None)})


def _not_a_string_map(value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, dict):
        return True
    if _STRING_OR_NONE.issuperset(map(type, value.values())):  # the usual map, checked in C
        return False
    return not all(v is None or isinstance(v, str) for v in value.values())


_CONTAINERS = (dict, list)


def _nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether JSON `value` has arrays or objects nested more than `limit` deep (iterative: no recursion).

    One level at a time, each a comprehension (and `type(...) in`: what json.loads makes are exact dicts
    and lists): a review with managedFields holds hundreds of values, and a loop step per value cost as
    much as decoding the review."""
    level = [value]
    for _ in range(limit):
        level = [
            child
            for node in level
            for child in (node.values() if type(node) is dict else node)
            if type(child) in _CONTAINERS
        ]
        if not level:
            return False
    return True


def _pod_specs(kind: str, obj: dict[str, Any]) -> list[tuple[str, Any]]:
    """(where, spec) of every pod spec an object of `kind` carries: a Pod's own, a Job's template, the
    templates of a JobSet's replicated Jobs."""
    if kind == "Pod":
        return [("spec", obj.get("spec"))]
    if kind == "Job":
        return [("spec.template.spec", _at(obj, ("spec", "template", "spec")))]
    if kind == "JobSet":
        replicated = _at(obj, ("spec", "replicatedJobs"))
        if not isinstance(replicated, list):
            return []
        if len(replicated) > MAX_LIST_ITEMS:
            raise OverLimit(f"spec.replicatedJobs has {len(replicated)} entries, more than {MAX_LIST_ITEMS}")
        path = ("template", "spec", "template", "spec")
        return [
            (f"spec.replicatedJobs[{i}].template.spec.template.spec", _at(job, path))
            for i, job in enumerate(replicated)
            if isinstance(job, dict)
        ]
    return []


def _check_limits(request: dict[str, Any]) -> None:
    kind = str(request["kind"]["kind"])
    for field in ("object", "oldObject"):
        obj = request.get(field)
        if not isinstance(obj, dict):
            continue
        try:
            for where, spec in _pod_specs(kind, obj):
                check_pod_spec(spec, f"{kind} {where}")
        except OverLimit as err:
            raise ReviewOverLimit(
                request["uid"], f"{err}: refused by the exclusive-placement webhook"
            ) from err


def parse_review(body: bytes, *, counted: int | None = None) -> AdmissionReview:
    """`counted`: `webhook.body.containers(body)`, when the caller has counted them already."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise BadReview(f"body is not JSON: {err}") from err
    except RecursionError as err:
        raise BadReview(f"body nests JSON deeper than {MAX_JSON_DEPTH} levels") from err
    if not isinstance(data, dict):
        raise BadReview("body must be a JSON object (an AdmissionReview)")
    if data.get("kind") != ADMISSION_KIND:
        raise BadReview(f"kind must be {ADMISSION_KIND}, got {data.get('kind')!r}")
    if data.get("apiVersion") != ADMISSION_API_VERSION:
        raise BadReview(f"apiVersion must be {ADMISSION_API_VERSION}, got {data.get('apiVersion')!r}")
    request = data.get("request")
    if not isinstance(request, dict):
        raise BadReview("AdmissionReview has no request")
    if not isinstance(request.get("uid"), str) or not request["uid"]:
        raise BadReview("request.uid is missing")
    kind = request.get("kind")
    if not isinstance(kind, dict) or not isinstance(kind.get("kind"), str):
        raise BadReview("request.kind is missing")
    if request.get("operation") not in _OPERATIONS:
        raise BadReview(f"request.operation must be one of {', '.join(_OPERATIONS)}")
    obj = request.get("object")
    if obj is not None and not isinstance(obj, dict):
        raise BadReview("request.object must be an object")
    _check_limits(request)  # before anything walks the whole review
    # Each level of nesting opens with a `{` or `[` of the body: a body with fewer cannot nest deeper.
    if counted is None:
        counted = containers(body)
    if counted > MAX_JSON_DEPTH and _nested_deeper_than(data, MAX_JSON_DEPTH):
        raise BadReview(f"body nests JSON deeper than {MAX_JSON_DEPTH} levels")
    for field in ("metadata", "spec"):  # the API server sends typed objects: both are always objects
        if obj is not None and not isinstance(obj.get(field, {}), dict):
            raise BadReview(f"request.object.{field} must be an object")
    for path in STRING_MAPS:
        if obj is not None and _not_a_string_map(_at(obj, path)):
            raise BadReview(f"request.object.{'.'.join(path)} must map strings to strings")
    for field in ("namespace", "name"):
        if not isinstance(request.get(field, ""), str):
            raise BadReview(f"request.{field} must be a string")
    user = request.get("userInfo", {})
    if not isinstance(user, dict) or not isinstance(user.get("username", ""), str):
        raise BadReview("request.userInfo.username must be a string")
    return {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": ADMISSION_KIND,
        "request": cast(AdmissionRequest, request),
    }


_PATCH_ENCODER = json.JSONEncoder(separators=(",", ":"))
"""`json.dumps(patch, separators=...)` without building an encoder per call."""


def _review(response: AdmissionResponse) -> AdmissionReview:
    return {"apiVersion": ADMISSION_API_VERSION, "kind": ADMISSION_KIND, "response": response}


def _with_warnings(response: AdmissionResponse, warnings: tuple[str, ...] | list[str]) -> AdmissionResponse:
    if warnings:
        response["warnings"] = list(warnings)
    return response


def allowed(uid: str, warnings: tuple[str, ...] = ()) -> AdmissionReview:
    return _review(_with_warnings({"uid": uid, "allowed": True}, warnings))


def denied(uid: str, message: str, code: int = 403, warnings: tuple[str, ...] = ()) -> AdmissionReview:
    response: AdmissionResponse = {
        "uid": uid,
        "allowed": False,
        "status": {"code": code, "message": message, "reason": "Forbidden" if code == 403 else "BadRequest"},
    }
    return _review(_with_warnings(response, warnings))


def patched(uid: str, patch: JsonPatch, warnings: tuple[str, ...] = ()) -> AdmissionReview:
    """Allowed with a JSONPatch; an empty patch is omitted (plain Allowed)."""
    if not patch:
        return allowed(uid, warnings)
    response: AdmissionResponse = {
        "uid": uid,
        "allowed": True,
        "patchType": "JSONPatch",
        "patch": base64.b64encode(_PATCH_ENCODER.encode(patch).encode()).decode("ascii"),
    }
    return _review(_with_warnings(response, warnings))


def errored(uid: str, message: str, code: int = 500) -> AdmissionReview:
    response: AdmissionResponse = {
        "uid": uid,
        "allowed": False,
        "status": {"code": code, "message": message, "reason": "InternalError"},
    }
    return _review(response)


def from_verdict(uid: str, verdict: Verdict, *, mutating: bool) -> AdmissionReview:
    if not verdict.allowed:
        return denied(uid, verdict.message, warnings=verdict.warnings)
    if mutating:
        return patched(uid, verdict.patch, verdict.warnings)
    if verdict.patch:
        raise ValueError("a validating webhook must not patch")
    return allowed(uid, verdict.warnings)


def decode_patch(review: AdmissionReview) -> JsonPatch:
    """The JSONPatch inside a response (empty when there is none); for tests and tools."""
    response = review.get("response")
    if response is None or "patch" not in response:
        return []
    ops: JsonPatch = json.loads(base64.b64decode(response["patch"]))
    return ops
