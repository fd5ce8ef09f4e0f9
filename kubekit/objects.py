"""Kubernetes objects as kubekit handles them: plain JSON dicts, and the few null-safe accessors the client,
the informer and the keys read (the domain's accessors are `placement.objects`; the same `Obj` shape)."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def metadata(obj: Obj) -> Obj:
    """`obj["metadata"]` when it is a map, else an empty map."""
    value = obj.get("metadata")
    return value if isinstance(value, dict) else {}


def name_of(obj: Obj) -> str:
    return str(metadata(obj).get("name") or "")


def namespace_of(obj: Obj, default: str = "") -> str:
    return str(metadata(obj).get("namespace") or default)
