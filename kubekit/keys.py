"""Object keys: `namespace/name` for namespaced objects, `name` for cluster-scoped ones (client-go's
`MetaNamespaceKeyFunc`). Caches and work queues of both binaries key objects this way."""

from __future__ import annotations

from kubekit.objects import Obj, name_of, namespace_of


def object_key(obj: Obj) -> str:
    name = name_of(obj)
    namespace = namespace_of(obj)
    return f"{namespace}/{name}" if namespace else name
