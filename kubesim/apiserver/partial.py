"""Metadata-only responses: `PartialObjectMetadata` (get, watch), `PartialObjectMetadataList` (list).

A client asks with the `as`, `g` and `v` parameters of a JSON media range in `Accept`, as client-go's
metadata client (controller-runtime's metadata-only informers) does:
`application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json` for a list and
`...;as=PartialObjectMetadata;...` for a get or a watch. Ranges are tried in order and the first one the
server can produce wins: a plain `application/json` before the transform means whole objects.

Upstream: kubernetes/apiserver `pkg/endpoints/handlers/response.go`, `transformObject`,
`asPartialObjectMetadata` and `asPartialObjectMetadataList` (the object's whole `metadata`, kind and
apiVersion `meta.k8s.io/v1`; a list keeps its resourceVersion and continue token), and the 406
NotAcceptable of asking for the singular on a list or the list on a single object. Watch events carry
`PartialObjectMetadata` objects (`handlers/watch.go`, each event object goes through the same transform).
kubesim answers in JSON only (a protobuf range is skipped) and serves `meta.k8s.io/v1` and `v1beta1`.
"""

from __future__ import annotations

from typing import Any, Final

from kubesim.errors import ApiError

PARTIAL: Final = "PartialObjectMetadata"
PARTIAL_LIST: Final = "PartialObjectMetadataList"
META_GROUP: Final = "meta.k8s.io"
META_VERSIONS: Final = frozenset({"v1", "v1beta1"})
_JSON_RANGES: Final = frozenset({"application/json", "application/*", "*/*"})


def _parameters(media_range: str) -> tuple[str, dict[str, str]]:
    kind, *params = (part.strip() for part in media_range.split(";"))
    parsed: dict[str, str] = {}
    for param in params:
        key, _, value = param.partition("=")
        parsed[key.strip().lower()] = value.strip()
    return kind.lower(), parsed


def requested(accept: str) -> tuple[str, str] | None:
    """(kind, version) of the metadata transform the first usable JSON range of `accept` asks for, or None
    when that range asks for whole objects (or for another transform, such as a Table)."""
    for media_range in accept.split(","):
        kind, params = _parameters(media_range)
        if kind not in _JSON_RANGES:
            continue
        transform = params.get("as")
        if transform is None:
            return None
        if transform in (PARTIAL, PARTIAL_LIST) and params.get("g") == META_GROUP:
            if params.get("v") in META_VERSIONS:
                return transform, params["v"]
            continue
        return None
    return None


def not_acceptable(message: str) -> ApiError:
    return ApiError(406, "NotAcceptable", message)


def check(wanted: tuple[str, str], *, listing: bool) -> str:
    """The apiVersion to answer with; 406 when the singular is asked of a list or the list of one object."""
    kind, version = wanted
    if listing and kind != PARTIAL_LIST:
        raise not_acceptable("you requested PartialObjectMetadata, but the requested object is a list")
    if not listing and kind != PARTIAL:
        raise not_acceptable(
            "you requested PartialObjectMetadataList, but the requested object is not a list"
        )
    return f"{META_GROUP}/{version}"


def partial(obj: dict[str, Any], api_version: str) -> dict[str, Any]:
    return {"kind": PARTIAL, "apiVersion": api_version, "metadata": obj["metadata"]}


def partial_list(
    items: list[dict[str, Any]], api_version: str, resource_version: str, continue_token: str | None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    return {
        "kind": PARTIAL_LIST,
        "apiVersion": api_version,
        "metadata": metadata,
        "items": [partial(item, api_version) for item in items],
    }
