"""Dynamic admission: calls registered Mutating/ValidatingWebhookConfigurations like kube-apiserver does.

Honoured: rules (operations, apiGroups, apiVersions, resources incl. subresources, scope), objectSelector,
namespaceSelector, matchPolicy (one version per group is served, so Exact and Equivalent agree),
failurePolicy, timeoutSeconds, sideEffects (dry-run requests to webhooks with side effects are rejected),
reinvocationPolicy IfNeeded, matchConditions (CEL, see kubesim.apiserver.cel; compiled once per configuration
resourceVersion). Mutating webhooks run in configuration-name order with their JSONPatch applied, each one's
matchConditions evaluated on the object as earlier webhooks left it; then validating webhooks run
concurrently. Only `clientConfig.url` can be resolved here (no cluster DNS): a `clientConfig.service`
reference fails like an unreachable webhook (devstack rewrites service to url).

Webhooks served in-process (`serve_in_process`: JobSet's pod webhooks, run by kubesim's JobSet manager)
are configurations like any other, ordered and matched with the stored ones, but answered by a Python
handler instead of an HTTPS call; they are not counted in `admission.*` (that counts external calls).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import ssl
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import httpx
import jsonpatch

from kubesim.apiserver.cel import MatchCondition, compile_conditions, evaluate
from kubesim.apiserver.patches import deep_copy
from kubesim.apiserver.resources import ResourceType
from kubesim.apiserver.selectors import LabelSelector, selector_from_dict
from kubesim.apiserver.store import Store
from kubesim.errors import ApiError, internal, qualified
from kubesim.interface import WebhookHandler, WebhookReply
from kubesim.stats import Stats

log = logging.getLogger(__name__)

Obj = dict[str, Any]
MUTATING = "mutatingwebhookconfigurations"
VALIDATING = "validatingwebhookconfigurations"
SIDE_EFFECT_FREE = frozenset({"None", "NoneOnDryRun"})


@dataclass(frozen=True)
class Rule:
    operations: frozenset[str]
    groups: frozenset[str]
    versions: frozenset[str]
    resources: tuple[tuple[str, str], ...]  # (resource, subresource) patterns; "" = main resource
    scope: str

    def matches(self, operation: str, rt: ResourceType, subresource: str) -> bool:
        if "*" not in self.operations and operation not in self.operations:
            return False
        if "*" not in self.groups and rt.group not in self.groups:
            return False
        if "*" not in self.versions and rt.version not in self.versions:
            return False
        if (self.scope == "Namespaced" and not rt.namespaced) or (self.scope == "Cluster" and rt.namespaced):
            return False
        for resource, sub in self.resources:
            if resource not in ("*", rt.plural):
                continue
            if sub == subresource or (sub == "*" and subresource):
                return True
        return False


@dataclass(frozen=True)
class Webhook:
    name: str
    configuration: str
    mutating: bool
    rules: tuple[Rule, ...]
    url: str | None
    service: str | None
    ca_bundle: str
    failure_policy: str
    timeout_seconds: float
    side_effects: str
    reinvoke: bool
    namespace_selector: LabelSelector
    object_selector: LabelSelector
    match_conditions: tuple[MatchCondition, ...] = ()
    handler: WebhookHandler | None = None
    """Set for a webhook served in-process: called instead of an HTTPS request."""


def _parse_rule(raw: Obj) -> Rule:
    resources = []
    for pattern in raw.get("resources") or []:
        resource, _, sub = str(pattern).partition("/")
        resources.append((resource, sub))
    return Rule(
        frozenset(raw.get("operations") or []),
        frozenset(raw.get("apiGroups") or []),
        frozenset(raw.get("apiVersions") or []),
        tuple(resources),
        str(raw.get("scope") or "*"),
    )


def parse_configuration(config: Obj, *, mutating: bool) -> list[Webhook]:
    hooks = []
    for raw in config.get("webhooks") or []:
        client = raw.get("clientConfig") or {}
        service = client.get("service")
        hooks.append(
            Webhook(
                name=str(raw.get("name", "")),
                configuration=str(config["metadata"]["name"]),
                mutating=mutating,
                rules=tuple(_parse_rule(r) for r in raw.get("rules") or []),
                url=client.get("url"),
                service=f"{service.get('namespace')}/{service.get('name')}" if service else None,
                ca_bundle=str(client.get("caBundle") or ""),
                failure_policy=str(raw.get("failurePolicy") or "Fail"),
                timeout_seconds=float(raw.get("timeoutSeconds") or 10),
                side_effects=str(raw.get("sideEffects") or "Unknown"),
                reinvoke=mutating and raw.get("reinvocationPolicy") == "IfNeeded",
                namespace_selector=selector_from_dict(raw.get("namespaceSelector") or {}),
                object_selector=selector_from_dict(raw.get("objectSelector") or {}),
                match_conditions=compile_conditions(raw.get("matchConditions") or []),
            )
        )
    return hooks


def _labels(obj: Obj | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


class ClientPool:
    """One pooled HTTPS client per caBundle: admission must stay cheap under thousands of calls."""

    def __init__(self) -> None:
        self._clients: dict[str, httpx.AsyncClient] = {}

    def get(self, ca_bundle: str) -> httpx.AsyncClient:
        client = self._clients.get(ca_bundle)
        if client is None:
            verify: ssl.SSLContext | bool = True
            if ca_bundle:
                verify = ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode())
            client = httpx.AsyncClient(
                verify=verify, limits=httpx.Limits(max_connections=64, max_keepalive_connections=64)
            )
            self._clients[ca_bundle] = client
        return client

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()


@dataclass
class AdmissionRequest:
    operation: str
    rt: ResourceType
    subresource: str
    namespace: str
    name: str
    obj: Obj | None
    old: Obj | None
    dry_run: bool
    username: str
    kind: Obj  # {"group", "version", "kind"} of the object sent


class Admission:
    def __init__(self, store: Store, stats: Stats) -> None:
        self.store = store
        self.stats = stats
        self.pool = ClientPool()
        # resource -> ((store version, in-process version), every webhook in call order)
        self._cache: dict[str, tuple[tuple[int, int], list[Webhook]]] = {}
        # (resource, configuration name) -> (its resourceVersion, its parsed webhooks, CEL compiled)
        self._parsed: dict[tuple[str, str], tuple[str, list[Webhook]]] = {}
        # (resource, configuration name) -> the webhooks of a configuration served in-process
        self._in_process: dict[tuple[str, str], list[Webhook]] = {}
        self._in_process_version = 0

    def serve_in_process(
        self, configuration: Obj, handlers: Mapping[str, WebhookHandler], *, mutating: bool
    ) -> Callable[[], None]:
        """Add a configuration whose webhooks `handlers` answer (by webhook name); returns its removal.
        It takes its place among the stored configurations by name, as a registered one would."""
        resource = MUTATING if mutating else VALIDATING
        name = str(configuration["metadata"]["name"])
        hooks = parse_configuration(configuration, mutating=mutating)
        missing = [hook.name for hook in hooks if hook.name not in handlers]
        if missing:
            raise ValueError(f"configuration {name}: no in-process handler for webhooks {missing}")
        key = (resource, name)
        if key in self._in_process:
            raise ValueError(f"configuration {name} is already served in-process")
        self._in_process[key] = [replace(hook, handler=handlers[hook.name]) for hook in hooks]
        self._in_process_version += 1

        def unregister() -> None:
            if self._in_process.pop(key, None) is not None:
                self._in_process_version += 1

        return unregister

    def webhooks(self, resource: str) -> list[Webhook]:
        rs = self.store.resources[resource]
        version = (rs.history[-1].rv if rs.history else 0, self._in_process_version)
        cached = self._cache.get(resource)
        if cached is not None and cached[0] == version:
            return cached[1]
        configurations: list[tuple[str, list[Webhook]]] = []
        current: set[tuple[str, str]] = set()
        for config in rs.objects.values():
            key = (resource, str(config["metadata"]["name"]))
            rv = str(config["metadata"].get("resourceVersion", ""))
            parsed = self._parsed.get(key)
            if parsed is None or parsed[0] != rv:
                parsed = (rv, parse_configuration(config, mutating=resource == MUTATING))
                self._parsed[key] = parsed
            current.add(key)
            configurations.append((key[1], parsed[1]))
        for key in [k for k in self._parsed if k[0] == resource and k not in current]:
            del self._parsed[key]
        configurations += [(key[1], hooks) for key, hooks in self._in_process.items() if key[0] == resource]
        hooks: list[Webhook] = []
        for _name, config_hooks in sorted(configurations, key=lambda item: item[0]):
            hooks += config_hooks
        self._cache[resource] = (version, hooks)
        return hooks

    def _applies(self, hook: Webhook, req: AdmissionRequest) -> bool:
        if not any(rule.matches(req.operation, req.rt, req.subresource) for rule in hook.rules):
            return False
        if not hook.object_selector.empty and not (
            hook.object_selector.matches(_labels(req.obj)) or hook.object_selector.matches(_labels(req.old))
        ):
            return False
        if not hook.namespace_selector.empty:
            if req.rt.plural == "namespaces":
                ns_labels = _labels(req.obj or req.old)
            elif req.rt.namespaced:
                ns = self.store.get("namespaces", "", req.namespace)
                ns_labels = _labels(ns)
            else:
                return True
            return hook.namespace_selector.matches(ns_labels)
        return True

    def _should_call(self, hook: Webhook, req: AdmissionRequest) -> bool:
        """matchConditions on the request as it is now, then the dry-run check (kube-apiserver's order)."""
        if hook.match_conditions:
            variables = {"object": req.obj, "oldObject": req.old, "request": _request_fields("", req)}
            result = evaluate(hook.match_conditions, variables)
            if result.skipped_by is not None:
                log.debug("webhook %s skipped: matchCondition %s is false", hook.name, result.skipped_by)
                return False
            if result.errors:
                if hook.failure_policy == "Ignore":
                    log.warning("webhook %s skipped, matchConditions failed: %s", hook.name, result.errors)
                    return False
                log.warning(
                    "webhook %s: matchConditions failed, failing closed: %s", hook.name, result.errors
                )
                raise match_conditions_failed(req, result.errors)
        if req.dry_run and hook.side_effects not in SIDE_EFFECT_FREE:
            raise ApiError(400, "BadRequest", f'admission webhook "{hook.name}" does not support dry run')
        return True

    def _matching(self, resource: str, req: AdmissionRequest) -> list[Webhook]:
        return [h for h in self.webhooks(resource) if self._applies(h, req)]

    async def mutate(self, req: AdmissionRequest, warnings: list[str]) -> Obj | None:
        """Mutating webhooks in name order, JSONPatch applied; IfNeeded ones re-run once after a change."""
        mutating = self._matching(MUTATING, req)
        last_change: dict[str, int] = {}
        called: list[Webhook] = []
        changes = 0
        for hook in mutating:
            if not self._should_call(hook, req):
                continue
            called.append(hook)
            if await self._mutate(hook, req, warnings):
                changes += 1
            last_change[hook.name] = changes
        if changes:
            for hook in called:
                if hook.reinvoke and changes > last_change[hook.name] and self._should_call(hook, req):
                    await self._mutate(hook, req, warnings)
        return req.obj

    async def validate(self, req: AdmissionRequest, warnings: list[str]) -> None:
        """Validating webhooks, concurrently (as kube-apiserver does); the first denial wins."""
        validating = [h for h in self._matching(VALIDATING, req) if self._should_call(h, req)]
        if len(validating) == 1:
            await self._validate(validating[0], req, warnings)
        elif validating:
            results = await asyncio.gather(
                *(self._validate(hook, req, warnings) for hook in validating), return_exceptions=True
            )
            for result in results:
                if isinstance(result, BaseException):
                    raise result

    async def _mutate(self, hook: Webhook, req: AdmissionRequest, warnings: list[str]) -> bool:
        if hook.handler is not None:
            reply = await self._call_in_process(hook, req, warnings)
            if reply is None or reply.obj is None or reply.obj == req.obj:
                return False
            req.obj = reply.obj
            return True
        response = await self._call(hook, req, warnings)
        if not response or not response.get("patch"):
            return False
        if response.get("patchType", "JSONPatch") != "JSONPatch":
            raise internal(f'failed calling webhook "{hook.name}": unsupported patch type')
        try:
            operations = json.loads(base64.b64decode(response["patch"]))
            patched = jsonpatch.JsonPatch(operations).apply(req.obj)
        except (ValueError, jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            raise internal(f'failed calling webhook "{hook.name}": failed to apply patch: {exc}') from exc
        if patched == req.obj:
            return False
        req.obj = patched
        return True

    async def _validate(self, hook: Webhook, req: AdmissionRequest, warnings: list[str]) -> None:
        if hook.handler is not None:
            await self._call_in_process(hook, req, warnings)
        else:
            await self._call(hook, req, warnings)

    async def _call_in_process(
        self, hook: Webhook, req: AdmissionRequest, warnings: list[str]
    ) -> WebhookReply | None:
        """An in-process webhook: its reply if allowed, None for an ignored failure; raises on denial or
        under failurePolicy Fail when the handler itself fails."""
        assert hook.handler is not None
        try:
            obj = req.obj if req.obj is not None else {}
            reply = await hook.handler(deep_copy(obj) if hook.mutating else obj)
        except Exception as exc:
            if hook.failure_policy == "Ignore":
                log.warning(
                    "in-process webhook %s failed, ignored (failurePolicy Ignore): %s", hook.name, exc
                )
                return None
            log.exception("in-process webhook %s failed (failurePolicy Fail)", hook.name)
            message = f'failed calling webhook "{hook.name}": failed to call webhook: {exc}'
            raise internal(message, message) from exc
        warnings.extend(reply.warnings)
        if not reply.allowed:
            raise denial(hook.name, dict(reply.status or {}))
        return reply

    async def _call(self, hook: Webhook, req: AdmissionRequest, warnings: list[str]) -> Obj | None:
        """One call: the response if allowed, None for an ignored failure; raises on denial or Fail."""
        self.stats.admission_calls += 1
        uid = str(uuid.uuid4())
        try:
            response = await self._post(hook, self._review(uid, req))
            if response.get("uid") != uid:
                raise ValueError(f"expected response.uid={uid!r}, got {response.get('uid')!r}")
        except Exception as exc:
            self.stats.admission_errors += 1
            if hook.failure_policy == "Ignore":
                log.warning("webhook %s failed, ignored (failurePolicy Ignore): %s", hook.name, exc)
                return None
            log.warning("webhook %s failed (failurePolicy Fail): %s", hook.name, exc)
            message = f'failed calling webhook "{hook.name}": failed to call webhook: {exc}'
            raise internal(message, message) from exc
        warnings.extend(str(w) for w in response.get("warnings") or [])
        if not response.get("allowed"):
            self.stats.admission_denied += 1
            raise denial(hook.name, response.get("status") or {})
        return response

    async def _post(self, hook: Webhook, review: Obj) -> Obj:
        if not hook.url:
            raise ValueError(f"service {hook.service} cannot be resolved by kubesim: use clientConfig.url")
        client = self.pool.get(hook.ca_bundle)
        reply = await client.post(hook.url, json=review, timeout=hook.timeout_seconds)
        if reply.status_code != 200:
            raise ValueError(
                f"received invalid webhook response: HTTP {reply.status_code}: {reply.text[:200]}"
            )
        body = reply.json()
        response = body.get("response") if isinstance(body, dict) else None
        if not isinstance(response, dict):
            raise ValueError("received invalid webhook response: no response field")
        return response

    @staticmethod
    def _review(uid: str, req: AdmissionRequest) -> Obj:
        request = _request_fields(uid, req) | {"object": req.obj, "oldObject": req.old}
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}

    async def aclose(self) -> None:
        await self.pool.aclose()


def _request_fields(uid: str, req: AdmissionRequest) -> Obj:
    """The AdmissionRequest without its objects: the review's `request`, and CEL's `request` variable."""
    resource = {"group": req.rt.group, "version": req.rt.version, "resource": req.rt.plural}
    request: Obj = {
        "uid": uid,
        "kind": req.kind,
        "resource": resource,
        "requestKind": req.kind,
        "requestResource": resource,
        "name": req.name,
        "namespace": req.namespace,
        "operation": req.operation,
        "userInfo": {"username": req.username, "groups": ["system:authenticated"]},
        "dryRun": req.dry_run,
        "options": {
            "apiVersion": "meta.k8s.io/v1",
            "kind": {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}.get(
                req.operation, "CreateOptions"
            ),
        },
    }
    if req.subresource:
        request["subResource"] = req.subresource
        request["requestSubResource"] = req.subresource
    if not req.rt.namespaced:
        request.pop("namespace")
    return request


def match_conditions_failed(req: AdmissionRequest, errors: tuple[str, ...]) -> ApiError:
    """kube-apiserver fails closed with 403 Forbidden: `<resource> "<name>" is forbidden: <errors>`."""
    cause = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    details: Obj = {"name": req.name, "kind": req.rt.plural}
    if req.rt.group:
        details["group"] = req.rt.group
    resource = qualified(req.rt.plural, req.rt.group)
    return ApiError(403, "Forbidden", f'{resource} "{req.name}" is forbidden: {cause}', details)


def denial(webhook: str, status: Obj) -> ApiError:
    """The real API server's shape: `admission webhook "<name>" denied the request: <message>`, code 400."""
    denied_by = f'admission webhook "{webhook}" denied the request'
    if status.get("message"):
        message = f"{denied_by}: {status['message']}"
    elif status.get("reason"):
        message = f"{denied_by}: {status['reason']}"
    else:
        message = f"{denied_by} without explanation"
    return ApiError(
        int(status.get("code") or 400), str(status.get("reason") or ""), message, status.get("details")
    )
