"""The REST wire: a thin Starlette layer over `ApiServer` (content types, Status bodies, watch streams).

Faults (`--faults`) apply here, to external API requests only; /debug/*, health and discovery are exempt.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from kubesim.apiserver import discovery, partial
from kubesim.apiserver.conversion import Conversion, conversion_of
from kubesim.apiserver.faults import FaultInjector, parse_faults
from kubesim.apiserver.media import decode_body, decode_patch
from kubesim.apiserver.protobuf.decode import decodes
from kubesim.apiserver.resources import ResourceType, lookup
from kubesim.apiserver.server import ApiServer, request_warnings
from kubesim.apiserver.tables import table, wants_table
from kubesim.errors import ApiError, bad_request, method_not_allowed, unsupported_media_type
from kubesim.interface import PatchType

log = logging.getLogger(__name__)

CLIENT = "external"
"""Client name of an HTTP request without a User-Agent; with one, `external:<product>` (`client_name`)."""
_PRODUCT_CHARS = re.compile(r"[^A-Za-z0-9._-]")
MAX_PRODUCT_LENGTH = 64
PATCH_TYPES: dict[str, PatchType] = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+json": "apply",
}
# What kube-apiserver answers with ("@" is not a valid media-type character for Go clients).
OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
DEFAULT_WATCH_TIMEOUT = 1800.0


def client_name(request: Request) -> str:
    """The stats' client of an HTTP request: `external:` + the User-Agent's product (its first token up to
    "/", e.g. `external:kubectl`, `external:exclusive-placement-webhook`), so the requests of the webhook, the
    resizer and kubectl are counted apart, as kube-apiserver's audit log tells them apart by userAgent;
    `external` when the header is absent. Characters outside [A-Za-z0-9._-] become "_", at most 64 kept."""
    agent = request.headers.get("user-agent", "").strip()
    product = _PRODUCT_CHARS.sub("_", agent.split(maxsplit=1)[0].split("/", 1)[0]) if agent else ""
    return f"{CLIENT}:{product[:MAX_PRODUCT_LENGTH]}" if product else CLIENT


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps(body, separators=(",", ":")),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


def error_response(exc: ApiError) -> Response:
    headers = {}
    if exc.status == 429:
        headers["Retry-After"] = str(exc.details.get("retryAfterSeconds", 1))
    return json_response(exc.to_status(), exc.status, headers)


def _bool(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1")


def _dry_run(request: Request) -> bool:
    values = request.query_params.getlist("dryRun")
    for value in values:
        if value != "All":
            raise bad_request(f'dryRun: Unsupported value: "{value}": supported values: "All"')
    return bool(values)


def _include(request: Request) -> str:
    return request.query_params.get("includeObject") or "Metadata"


def _list_kind(rt: ResourceType) -> str:
    return f"{rt.kind}List"


NodeFaults = Callable[[str, str], Awaitable[dict[str, int]]]
"""(action "fail" | "recover", label selector) -> {"nodes": n, "pods": m}: the controllers' node faults."""


class RestApi:
    def __init__(
        self,
        api: ApiServer,
        *,
        faults: FaultInjector | None = None,
        bookmark_interval: float = 5.0,
        server_address: str = "127.0.0.1:6443",
        node_faults: NodeFaults | None = None,
        seed: int | None = None,
    ) -> None:
        self.api = api
        self.faults = faults
        self.bookmark_interval = bookmark_interval
        self.server_address = server_address
        self.node_faults = node_faults
        self.seed = seed

    # --- discovery and debug -------------------------------------------------------------------------

    async def version(self, request: Request) -> Response:
        return json_response(discovery.KUBERNETES_VERSION)

    async def health(self, request: Request) -> Response:
        return Response("ok", media_type="text/plain")

    async def api_versions(self, request: Request) -> Response:
        return json_response(discovery.api_versions(self.server_address))

    async def apis(self, request: Request) -> Response:
        return json_response(discovery.api_group_list())

    async def api_group(self, request: Request) -> Response:
        doc = discovery.api_group(request.path_params["group"])
        if doc is None:
            return error_response(
                ApiError(404, "NotFound", "the server could not find the requested resource")
            )
        return json_response(doc)

    async def openapi_v2(self, request: Request) -> Response:
        if "protobuf" in request.headers.get("accept", ""):
            return Response(discovery.openapi_v2_protobuf(), media_type=OPENAPI_V2_PROTOBUF)
        return json_response(discovery.openapi_v2_document())

    async def openapi_v3(self, request: Request) -> Response:
        path = request.path_params.get("path", "")
        if not path:
            return json_response(discovery.openapi_v3_root())
        group_version = path.removeprefix("api/").removeprefix("apis/")
        doc = discovery.openapi_v3_document(group_version)
        if doc is None:
            return error_response(
                ApiError(404, "NotFound", "the server could not find the requested resource")
            )
        return json_response(doc)

    async def debug_stats(self, request: Request) -> Response:
        return json_response(self.api.stats.snapshot())

    async def debug_reset(self, request: Request) -> Response:
        self.api.stats.reset()
        return json_response(self.api.stats.snapshot())

    async def debug_faults(self, request: Request) -> Response:
        """Replace the `--faults` spec at runtime: body `{"faults": "error-rate=0.1,..."}` ("" turns them
        off), so a test can set a cluster up cleanly and then inject faults."""
        try:
            body = json.loads(await request.body() or b"{}")
            spec = parse_faults(body.get("faults") if isinstance(body, dict) else None)
        except ValueError as err:
            return error_response(bad_request(str(err)))
        self.faults = FaultInjector(spec, self.api.stats, self.seed) if spec.active else None
        return json_response({"faults": body.get("faults") or ""})

    async def debug_node_faults(self, request: Request) -> Response:
        """`POST /debug/fail-nodes?labelSelector=...` (or `/debug/recover-nodes`): a node pool going away."""
        selector = request.query_params.get("labelSelector", "")
        if not selector:
            return error_response(bad_request("labelSelector is required"))
        if self.node_faults is None:
            return error_response(
                bad_request("node faults need the controllers (started with --no-controllers)")
            )
        action = "fail" if request.url.path.endswith("fail-nodes") else "recover"
        return json_response(await self.node_faults(action, selector))

    # --- resources -----------------------------------------------------------------------------------

    async def core(self, request: Request) -> Response:
        return await self._serve(request, "", "v1", request.path_params.get("rest", ""))

    async def grouped(self, request: Request) -> Response:
        params = request.path_params
        return await self._serve(request, params["group"], params["version"], params.get("rest", ""))

    async def _serve(self, request: Request, group: str, version: str, rest: str) -> Response:
        segments = [s for s in rest.split("/") if s]
        if not segments:
            doc = discovery.api_resource_list(f"{group}/{version}" if group else version)
            if doc is None:
                return error_response(
                    ApiError(404, "NotFound", "the server could not find the requested resource")
                )
            return json_response(doc)
        sink: list[str] = []
        token = request_warnings.set(sink)
        try:
            if self.faults is not None:
                delay = self.faults.latency_seconds()
                if delay:
                    await asyncio.sleep(delay)
                fault = self.faults.error()
                if fault is not None:
                    return error_response(fault)
            response = await self._dispatch(request, group, version, segments)
        except ApiError as exc:
            response = error_response(exc)
        except Exception:
            log.exception("unexpected error serving %s %s", request.method, request.url.path)
            response = error_response(
                ApiError(500, "InternalError", "Internal error occurred: see kubesim log")
            )
        finally:
            request_warnings.reset(token)
        for warning in sink:
            response.headers.append("Warning", f'299 - "{warning}"')
        return response

    async def _dispatch(self, request: Request, group: str, version: str, segments: list[str]) -> Response:
        namespace: str | None = None
        if segments[0] == "namespaces" and len(segments) >= 3 and segments[2] not in NAMESPACE_SUBRESOURCES:
            namespace, segments = segments[1], segments[2:]
        if len(segments) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        rt = lookup(group, version, segments[0])
        if namespace is not None and not rt.namespaced:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = segments[1] if len(segments) > 1 else None
        sub = segments[2] if len(segments) > 2 else None
        if sub is not None and sub not in rt.subresources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        method = request.method
        served = _Served(conversion_of(rt))
        if name is None:
            if method == "GET":
                if _bool(request.query_params.get("watch")):
                    return self._watch(request, rt, namespace, served)
                return self._list(request, rt, namespace, served)
            if method == "POST":
                body = await self._body(request, protobuf=decodes(rt.api_version, rt.kind))
                created = await self.api.create(
                    rt.plural,
                    served.stored(body),
                    namespace=namespace,
                    dry_run=_dry_run(request),
                    client=client_name(request),
                    copy=False,
                )
                return json_response(served.answer(created), 201)
            if method == "DELETE":
                return await self._delete_collection(request, rt, namespace, served)
            raise method_not_allowed()
        if method == "GET" and sub is None:
            obj = await self.api.get(
                rt.plural, name, namespace=namespace, client=client_name(request), copy=False
            )
            if wants_table(request.headers.get("accept", "")):
                rv = obj["metadata"]["resourceVersion"]
                doc = table(rt, [obj], resource_version=rv, include_object=_include(request))
                return json_response(served.table(doc))
            if (metadata_only := partial.requested(request.headers.get("accept", ""))) is not None:
                return json_response(partial.partial(obj, partial.check(metadata_only, listing=False)))
            return json_response(served.answer(obj))
        if method == "GET" and sub == "status":
            return json_response(
                await self.api.get(
                    rt.plural, name, namespace=namespace, client=client_name(request), copy=False
                )
            )
        if method == "POST" and sub == "binding":
            body = await self._body(request)
            body.setdefault("metadata", {}).setdefault("name", name)
            result = await self.api.create(
                rt.plural,
                body,
                namespace=namespace,
                subresource="binding",
                dry_run=_dry_run(request),
                client=client_name(request),
            )
            return json_response(result, 201)
        if method == "PUT":
            body = await self._body(request, protobuf=decodes(rt.api_version, rt.kind))
            body_name = (body.get("metadata") or {}).get("name")
            if body_name and body_name != name:
                raise bad_request(
                    f"the name of the object ({body_name}) does not match the name on the URL ({name})"
                )
            body.setdefault("metadata", {})["name"] = name
            updated = await self.api.update(
                rt.plural,
                served.stored(body),
                namespace=namespace,
                subresource=sub,
                client=client_name(request),
                dry_run=_dry_run(request),
                copy=False,
            )
            return json_response(served.answer(updated))
        if method == "PATCH":
            return await self._patch(request, rt, namespace, name, sub, served)
        if method == "DELETE" and sub is None:
            options = await self._body(request, optional=True, protobuf=True)
            query = request.query_params
            grace = query.get("gracePeriodSeconds", options.get("gracePeriodSeconds"))
            preconditions = options.get("preconditions") or {}
            deleted = await self.api.delete(
                rt.plural,
                name,
                namespace=namespace,
                grace_period_seconds=int(grace) if grace is not None else None,
                client=client_name(request),
                dry_run=_dry_run(request) or bool(options.get("dryRun")),
                propagation_policy=query.get("propagationPolicy", options.get("propagationPolicy")),
                precondition_rv=preconditions.get("resourceVersion"),
                precondition_uid=preconditions.get("uid"),
                copy=False,
            )
            return json_response(served.answer(deleted))
        raise method_not_allowed()

    async def _body(
        self, request: Request, *, optional: bool = False, protobuf: bool = False, patch: bool = False
    ) -> dict[str, Any]:
        """The decoded body: an object (a JSON patch may be a list). `protobuf`: the target kind (or
        DeleteOptions) may come as `application/vnd.kubernetes.protobuf`; `patch`: a patch body, whose
        media type `_patch` has already checked."""
        raw = await request.body()
        if not raw.strip():
            if optional:
                return {}
            raise bad_request("the request body is empty")
        content_type = request.headers.get("content-type")
        if patch:
            body = decode_patch(raw, content_type)
        else:
            body = decode_body(raw, content_type, accepts_protobuf=protobuf)
        if not isinstance(body, dict | list):
            raise bad_request("the request body must be an object")
        return body  # type: ignore[return-value]

    async def _patch(  # noqa: PLR0917
        self,
        request: Request,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        sub: str | None,
        served: _Served,
    ) -> Response:
        content_type = request.headers.get("content-type", "").split(";")[0].strip()
        patch_type = PATCH_TYPES.get(content_type)
        if patch_type is None:
            raise unsupported_media_type(content_type)
        existed = self.api.store.get(rt.plural, namespace or "" if rt.namespaced else "", name) is not None
        if rt.namespaced and namespace is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        body = await self._body(request, patch=True)
        result = await self.api.patch(
            rt.plural,
            name,
            served.stored_patch(body, patch_type),
            patch_type=patch_type,
            namespace=namespace,
            subresource=sub,
            client=client_name(request),
            dry_run=_dry_run(request),
            copy=False,
        )
        return json_response(served.answer(result), 200 if existed or patch_type != "apply" else 201)

    def _list(self, request: Request, rt: ResourceType, namespace: str | None, served: _Served) -> Response:
        query = request.query_params
        limit = query.get("limit")
        metadata_only = partial.requested(request.headers.get("accept", ""))
        api_version = partial.check(metadata_only, listing=True) if metadata_only is not None else ""
        items, rv, token = self.api.list_page(
            rt.plural,
            namespace=namespace,
            label_selector=query.get("labelSelector"),
            field_selector=served.field_selector(query.get("fieldSelector")),
            limit=int(limit) if limit else None,
            continue_token=query.get("continue"),
            client=client_name(request),
        )
        if wants_table(request.headers.get("accept", "")):
            doc = table(
                rt, items, resource_version=rv, include_object=_include(request), continue_token=token
            )
            return json_response(served.table(doc))
        if metadata_only is not None:
            return json_response(partial.partial_list(items, api_version, rv, token))
        metadata: dict[str, Any] = {"resourceVersion": rv}
        if token:
            metadata["continue"] = token
        return json_response(
            {
                "kind": _list_kind(rt),
                "apiVersion": rt.api_version,
                "metadata": metadata,
                "items": served.answers(items),
            }
        )

    async def _delete_collection(
        self, request: Request, rt: ResourceType, namespace: str | None, served: _Served
    ) -> Response:
        query = request.query_params
        options = await self._body(request, optional=True, protobuf=True)
        deleted = await self.api.delete_collection(
            rt.plural,
            namespace=namespace,
            label_selector=query.get("labelSelector"),
            field_selector=served.field_selector(query.get("fieldSelector")),
            client=client_name(request),
            dry_run=_dry_run(request),
            propagation_policy=query.get("propagationPolicy", options.get("propagationPolicy")),
        )
        rv = str(self.api.store.rv)
        return json_response(
            {
                "kind": _list_kind(rt),
                "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": rv},
                "items": served.answers(deleted),
            }
        )

    def _watch(self, request: Request, rt: ResourceType, namespace: str | None, served: _Served) -> Response:
        query = request.query_params
        metadata_only = partial.requested(request.headers.get("accept", ""))
        partial_version = partial.check(metadata_only, listing=False) if metadata_only is not None else ""
        watcher = self.api.subscribe(
            rt.plural,
            namespace=namespace,
            resource_version=query.get("resourceVersion"),
            label_selector=query.get("labelSelector"),
            field_selector=served.field_selector(query.get("fieldSelector")),
            initial=not query.get("resourceVersion"),
            client=client_name(request),
        )
        timeout = float(query.get("timeoutSeconds") or DEFAULT_WATCH_TIMEOUT)
        lifetime = self.faults.watch_lifetime() if self.faults is not None else None
        dropped = lifetime is not None and lifetime < timeout
        bookmarks = _bool(query.get("allowWatchBookmarks"))
        api = self.api
        as_table = wants_table(request.headers.get("accept", ""))
        include = _include(request)

        def encode(event_type: str, obj: Any, first: bool) -> bytes:
            if as_table and event_type in ("ADDED", "MODIFIED", "DELETED"):
                rv = obj["metadata"]["resourceVersion"]
                obj = served.table(
                    table(rt, [obj], resource_version=rv, include_object=include, with_columns=first)
                )
            elif partial_version and event_type in ("ADDED", "MODIFIED", "DELETED"):
                obj = partial.partial(obj, partial_version)
            elif event_type in ("ADDED", "MODIFIED", "DELETED"):
                obj = served.answer(obj)
            return _event(event_type, obj)

        async def stream() -> AsyncIterator[bytes]:
            start = time.monotonic()
            end = start + (lifetime if dropped and lifetime is not None else timeout)
            next_bookmark = start + self.bookmark_interval
            first = True
            try:
                while True:
                    now = time.monotonic()
                    if now >= end:
                        break
                    wait = end - now
                    if bookmarks:
                        wait = min(wait, max(0.0, next_bookmark - now))
                    try:
                        event_type, obj = await asyncio.wait_for(watcher.queue.get(), wait)
                    except TimeoutError:
                        if bookmarks and time.monotonic() >= next_bookmark:
                            next_bookmark = time.monotonic() + self.bookmark_interval
                            bookmark = {
                                "kind": rt.kind,
                                "apiVersion": rt.api_version,
                                "metadata": {"resourceVersion": str(api.store.rv)},
                            }
                            yield _event("BOOKMARK", bookmark)
                        continue
                    yield encode(event_type, obj, first)
                    first = False
                    if event_type == "ERROR":
                        break
                if dropped:
                    api.stats.watch_streams_dropped += 1
            finally:
                api.unsubscribe(rt.plural, watcher)

        return StreamingResponse(stream(), media_type="application/json")


class _Served:
    """The version a request addresses, when it is not the stored one: bodies, patches and field selectors
    converted to the stored version on the way in, objects converted back on the way out."""

    def __init__(self, conversion: Conversion | None) -> None:
        self.conversion = conversion

    def stored(self, body: Any) -> Any:
        return self.conversion.to_stored(body) if self.conversion and isinstance(body, dict) else body

    def stored_patch(self, patch: Any, patch_type: PatchType) -> Any:
        return patch if self.conversion is None else self.conversion.patch_to_stored(patch, patch_type)

    def field_selector(self, text: str | None) -> str | None:
        return text if self.conversion is None else self.conversion.field_selector(text)

    def answer(self, obj: Any) -> Any:
        if (
            self.conversion is None
            or not isinstance(obj, dict)
            or obj.get("kind") != self.conversion.served.kind
        ):
            return obj  # a Status, a PartialObjectMetadata
        return self.conversion.to_served(obj)

    def answers(self, objects: list[Any]) -> list[Any]:
        return objects if self.conversion is None else [self.answer(obj) for obj in objects]

    def table(self, doc: dict[str, Any]) -> dict[str, Any]:
        """A Table's rows are printed from the stored object; whole objects in it are served ones."""
        if self.conversion is not None:
            for row in doc["rows"]:
                row["object"] = self.answer(row["object"])
        return doc


def _event(event_type: str, obj: Any) -> bytes:
    return json.dumps({"type": event_type, "object": obj}, separators=(",", ":")).encode() + b"\n"


def create_app(
    api: ApiServer,
    *,
    faults: FaultInjector | None = None,
    bookmark_interval: float = 5.0,
    server_address: str = "127.0.0.1:6443",
    node_faults: NodeFaults | None = None,
    seed: int | None = None,
) -> Starlette:
    rest = RestApi(
        api,
        faults=faults,
        bookmark_interval=bookmark_interval,
        server_address=server_address,
        node_faults=node_faults,
        seed=seed,
    )
    all_methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    routes = [
        Route("/version", rest.version),
        Route("/version/", rest.version),
        Route("/healthz", rest.health),
        Route("/livez", rest.health),
        Route("/readyz", rest.health),
        Route("/api", rest.api_versions),
        Route("/api/", rest.api_versions),
        Route("/apis", rest.apis),
        Route("/apis/", rest.apis),
        Route("/openapi/v2", rest.openapi_v2),
        Route("/openapi/v3", rest.openapi_v3),
        Route("/openapi/v3/{path:path}", rest.openapi_v3),
        Route("/debug/stats", rest.debug_stats),
        Route("/debug/reset-stats", rest.debug_reset, methods=["POST"]),
        Route("/debug/faults", rest.debug_faults, methods=["POST"]),
        Route("/debug/fail-nodes", rest.debug_node_faults, methods=["POST"]),
        Route("/debug/recover-nodes", rest.debug_node_faults, methods=["POST"]),
        Route("/api/v1", rest.core, methods=all_methods),
        Route("/api/v1/{rest:path}", rest.core, methods=all_methods),
        Route("/apis/{group}", rest.api_group),
        Route("/apis/{group}/{version}", rest.grouped, methods=all_methods),
        Route("/apis/{group}/{version}/{rest:path}", rest.grouped, methods=all_methods),
    ]
    return Starlette(routes=routes)
