"""Object request bodies (create, update, delete options): the media types accepted and how each is decoded.

Upstream: kubernetes/apiserver `pkg/endpoints/handlers/negotiation/negotiate.go`,
`NegotiateInputSerializerForMediaType`: a missing Content-Type means the first supported type (JSON), an
unknown one is 415 UnsupportedMediaType naming the accepted types (`errors.go`, `errUnsupportedMediaType`).
Built-in kinds accept JSON, YAML and protobuf, in that order (kubernetes/apimachinery
`pkg/runtime/serializer/codec_factory.go`, `newSerializersForScheme`). kubesim accepts protobuf only for the
kinds `kubesim.apiserver.protobuf.decode` declares; for the others (and custom resources, as upstream) it
lists JSON and YAML. Patch bodies have their own media types (`kubesim.apiserver.http.PATCH_TYPES`).
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from kubesim.apiserver.protobuf import decode
from kubesim.errors import ApiError, bad_request

JSON = "application/json"
YAML = "application/yaml"
PROTOBUF = "application/vnd.kubernetes.protobuf"


def media_type(content_type: str | None) -> str:
    """`application/json; charset=utf-8` -> `application/json`; a missing header means JSON."""
    if not content_type or not content_type.strip():
        return JSON
    return content_type.split(";", 1)[0].strip().lower()


def unsupported_media_type(accepted: list[str], detail: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)} ({detail})",
    )


def decode_body(raw: bytes, content_type: str | None, *, accepts_protobuf: bool) -> Any:
    """The decoded body (JSON-shaped), or a 400 (malformed) / 415 (a media type, kind or field kubesim does
    not decode). `accepts_protobuf`: whether the target resource's kind has a protobuf declaration."""
    kind = media_type(content_type)
    accepted = [JSON, YAML, PROTOBUF] if accepts_protobuf else [JSON, YAML]
    if kind == JSON:
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise bad_request(f"the request body is not valid JSON: {exc}") from exc
    if kind == YAML:
        try:
            return yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise bad_request(f"the request body is not valid YAML: {exc}") from exc
    if kind == PROTOBUF and accepts_protobuf:
        try:
            return decode.decode_object(raw)
        except decode.Invalid as exc:
            raise bad_request(str(exc)) from exc
        except decode.Unsupported as exc:
            raise unsupported_media_type([JSON, YAML], f"{exc}; send it as {JSON}") from exc
    if kind == PROTOBUF:
        detail = "kubesim decodes protobuf bodies only of the kinds it declares"
        raise unsupported_media_type(accepted, detail)
    raise unsupported_media_type(accepted, f"got {content_type!r}")


def decode_patch(raw: bytes, content_type: str | None) -> Any:
    """A patch body: YAML for `application/apply-patch+yaml`, JSON for every other patch type."""
    as_yaml = "yaml" in media_type(content_type)
    try:
        return yaml.safe_load(raw) if as_yaml else json.loads(raw)
    except (ValueError, yaml.YAMLError) as exc:
        raise bad_request(f"the request body is not valid {'YAML' if as_yaml else 'JSON'}: {exc}") from exc
