"""`ApiServer`: the object semantics of kube-apiserver, implementing `kubesim.interface.KubeApi`.

The HTTP layer (`kubesim.apiserver.http`) is a thin wire over these same methods, so every request, from
kubectl or from an in-process controller, is counted in `Stats` and goes through defaulting, mutating
admission, validation and validating admission in the same order as the real API server.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import contextvars
import heapq
import json
import logging
import random
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from kubesim.apiserver.admission import Admission, AdmissionRequest
from kubesim.apiserver.defaults import apply_defaults, prepare_for_create
from kubesim.apiserver.patches import apply_patch, deep_copy
from kubesim.apiserver.priority import admit_pod, system_priority_classes, validate_priority_class
from kubesim.apiserver.resources import ResourceType, resource_type
from kubesim.apiserver.selectors import parse_field_selector, parse_label_selector
from kubesim.apiserver.store import Obj, Store, Watcher
from kubesim.apiserver.validation import validate_create, validate_update
from kubesim.errors import ApiError, already_exists, bad_request, conflict, invalid, not_found
from kubesim.interface import PatchType, WatchEvent
from kubesim.stats import Stats

log = logging.getLogger(__name__)

# Admission warnings of the current request (the HTTP layer turns them into `Warning` headers).
request_warnings: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "request_warnings", default=None
)

BOOTSTRAP_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
RESOURCES_WITH_STATUS = frozenset({"pods", "jobs", "nodes", "namespaces", "jobsets"})
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_UNCHANGED_ON_UPDATE = (
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


MAX_RACE_RETRIES = 5


class _Raced(Exception):
    """The object changed while this unconditional update awaited admission: re-apply to the fresh one."""


def _first(item: tuple[tuple[str, str], Obj]) -> tuple[str, str]:
    return item[0]


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_DELETED_UIDS_KEPT = 100_000


def _request_namespace(namespace: str | None, obj: Any) -> str | None:
    """The namespace a create or update is about: the request's, else the body's (a controller's call)."""
    if namespace or not isinstance(obj, dict):
        return namespace
    meta = obj.get("metadata")
    value = meta.get("namespace") if isinstance(meta, dict) else None
    return value if isinstance(value, str) and value else None


def _sub(resource: str, subresource: str | None) -> str:
    return f"{resource}/{subresource}" if subresource else resource


class ApiServer:
    def __init__(
        self, stats: Stats | None = None, *, history_size: int = 10_000, seed: int | None = None
    ) -> None:
        self.store = Store(history_size)
        self.stats = stats if stats is not None else Stats()
        self.admission = Admission(self.store, self.stats)
        self._rng = random.Random(seed)
        self._background: set[asyncio.Task[None]] = set()
        self._deleted_uids: OrderedDict[str, None] = OrderedDict()
        """uids of deleted objects (the last _DELETED_UIDS_KEPT): owners a late dependent may still name."""
        for name in BOOTSTRAP_NAMESPACES:
            ns: Obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            apply_defaults("namespaces", ns)
            self._stamp_new(resource_type("namespaces"), ns, "")
            prepare_for_create("namespaces", ns)
            self._commit(resource_type("namespaces"), "ADDED", ns, None)
        for priority_class in system_priority_classes():
            self._stamp_new(resource_type("priorityclasses"), priority_class, "")
            self._commit(resource_type("priorityclasses"), "ADDED", priority_class, None)

    async def aclose(self) -> None:
        for task in list(self._background):
            task.cancel()
        await self.admission.aclose()

    # --- helpers -------------------------------------------------------------------------------------

    def _namespace(self, rt: ResourceType, namespace: str | None, obj: Obj | None = None) -> str:
        if not rt.namespaced:
            return ""
        body_ns = ((obj or {}).get("metadata") or {}).get("namespace")
        if namespace and body_ns and body_ns != namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        return str(namespace or body_ns or "default")

    def _existing(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.store.get(rt.plural, namespace, name)
        if obj is None:
            raise not_found(rt.plural, name, rt.group)
        return obj

    def _require_namespace(self, rt: ResourceType, namespace: str) -> None:
        if rt.namespaced and self.store.get("namespaces", "", namespace) is None:
            raise not_found("namespaces", namespace)

    def _stamp_new(self, rt: ResourceType, obj: Obj, namespace: str) -> None:
        meta = obj["metadata"]
        if rt.namespaced:
            meta["namespace"] = namespace
        if not meta.get("name") and meta.get("generateName"):
            for _ in range(16):
                candidate = meta["generateName"] + "".join(self._rng.choice(_NAME_ALPHABET) for _ in range(5))
                if self.store.get(rt.plural, namespace, candidate) is None:
                    meta["name"] = candidate
                    break
        meta["uid"] = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        for key in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(key, None)

    def _commit(self, rt: ResourceType, event: str, obj: Obj, old: Obj | None) -> Obj:
        obj["metadata"]["resourceVersion"] = str(self.store.next_rv())
        if rt.plural == "events" and event != "DELETED":
            self.stats.count_event_write(obj)
        return self.store.write(rt.plural, event, obj, old)

    def _warn(self, warnings: list[str]) -> None:
        sink = request_warnings.get()
        if sink is not None:
            sink.extend(warnings)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    @staticmethod
    def _type_meta(rt: ResourceType, obj: Obj) -> None:
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if (kind and kind != rt.kind) or (api_version and api_version != rt.api_version):
            raise bad_request(
                f"the object provided is unrecognized (must be of type {rt.kind} {rt.api_version}): "
                f"{api_version}, Kind={kind}"
            )
        obj["kind"], obj["apiVersion"] = rt.kind, rt.api_version

    def _admission_request(  # noqa: PLR0917
        self,
        operation: str,
        rt: ResourceType,
        sub: str,
        ns: str,
        name: str,
        obj: Obj | None,
        old: Obj | None,
        *,
        dry_run: bool,
        client: str,
    ) -> AdmissionRequest:
        kind_obj = obj if obj is not None else old
        kind = {"group": rt.group, "version": rt.version, "kind": (kind_obj or {}).get("kind", rt.kind)}
        if sub == "binding":
            kind = {"group": "", "version": "v1", "kind": "Binding"}
        return AdmissionRequest(
            operation, rt, sub, ns, name, obj, old, dry_run, f"system:kubesim:{client}", kind
        )

    def _admit_builtin(self, operation: str, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
        """The built-in mutating admission plugins modelled (before the mutating webhooks): Priority."""
        if rt.plural == "pods":
            classes = {str(c["metadata"]["name"]): c for c in self.store.iter("priorityclasses")}
            admit_pod(operation, obj, old, classes)

    def _validate_builtin(self, operation: str, rt: ResourceType, obj: Obj) -> None:
        """The built-in validating admission plugins modelled (before the validating webhooks): Priority."""
        if rt.plural == "priorityclasses":
            validate_priority_class(operation, obj, self.store.iter("priorityclasses"))

    # --- create --------------------------------------------------------------------------------------

    async def create(
        self,
        resource: str,
        obj: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
        client: str = "controller",
        copy: bool = True,
    ) -> dict[str, Any]:
        rt = resource_type(resource)
        self.stats.count_request(
            "create", _sub(resource, subresource), client, _request_namespace(namespace, obj)
        )
        if not isinstance(obj, dict):
            raise bad_request("the body of the request must be a JSON object")
        obj = deep_copy(obj)
        ns = self._namespace(rt, namespace, obj)
        if subresource == "binding" and resource == "pods":
            return await self._bind(ns, obj, dry_run=dry_run, client=client)
        if subresource:
            raise ApiError(405, "MethodNotAllowed", f"create is not supported on {resource}/{subresource}")
        created = await self._create(rt, ns, obj, dry_run=dry_run, client=client)
        return deep_copy(created) if copy else created

    async def _create(self, rt: ResourceType, ns: str, obj: Obj, *, dry_run: bool, client: str) -> Obj:
        self._type_meta(rt, obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        self._require_namespace(rt, ns)
        if rt.namespaced:
            meta["namespace"] = ns
        apply_defaults(rt.plural, obj)
        warnings: list[str] = []
        req = self._admission_request(
            "CREATE", rt, "", ns, str(meta.get("name") or ""), obj, None, dry_run=dry_run, client=client
        )
        try:
            self._admit_builtin("CREATE", rt, obj, None)
            mutated = await self.admission.mutate(req, warnings)
            obj = mutated if mutated is not None else obj
            self._stamp_new(rt, obj, ns)
            prepare_for_create(rt.plural, obj)
            causes = validate_create(rt.plural, obj)
            if causes:
                raise invalid(rt.kind, rt.group, str(obj["metadata"].get("name") or ""), causes)
            name = obj["metadata"]["name"]
            if self.store.get(rt.plural, ns, name) is not None:
                raise already_exists(rt.plural, name, rt.group)
            req.obj, req.name = obj, name
            self._validate_builtin("CREATE", rt, obj)
            await self.admission.validate(req, warnings)
        except ApiError as exc:
            if rt.plural == "pods" and not dry_run and exc.status != 422 and exc.reason != "AlreadyExists":
                self.stats.pods_create_rejected += 1
            raise
        finally:
            self._warn(warnings)
        if dry_run:
            return obj
        if self.store.get(rt.plural, ns, name) is not None:  # created by someone while admission awaited
            raise already_exists(rt.plural, name, rt.group)
        if rt.plural == "pods":
            self.stats.pods_create_accepted += 1
        created = self._commit(rt, "ADDED", obj, None)
        self._collect_if_dangling(created)
        return created

    async def _bind(self, ns: str, binding: Obj, *, dry_run: bool, client: str) -> Obj:
        rt = resource_type("pods")
        name = str((binding.get("metadata") or {}).get("name") or "")
        node = str((binding.get("target") or {}).get("name") or "")
        if not name or not node:
            raise invalid("Binding", "", name, [("target.name", "Required value")])
        pod = self._existing(rt, ns, name)
        why = None
        if pod["spec"].get("nodeName"):
            why = f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"'
        elif pod["metadata"].get("deletionTimestamp"):
            why = f"pod {name} is being deleted, cannot be assigned to a host"
        elif pod["spec"].get("schedulingGates"):
            why = f"pod {name} has non-empty .spec.schedulingGates"
        if why:
            raise conflict("pods/binding", name, "", why)
        warnings: list[str] = []
        binding.setdefault("kind", "Binding")
        binding.setdefault("apiVersion", "v1")
        binding.setdefault("metadata", {}).setdefault("namespace", ns)
        req = self._admission_request(
            "CREATE", rt, "binding", ns, name, binding, None, dry_run=dry_run, client=client
        )
        try:
            await self.admission.mutate(req, warnings)
            await self.admission.validate(req, warnings)
        finally:
            self._warn(warnings)
        success = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
        if dry_run:
            return success
        pod = self._existing(rt, ns, name)
        if pod["spec"].get("nodeName"):
            raise conflict(
                "pods/binding",
                name,
                "",
                f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"',
            )
        new = deep_copy(pod)
        new["spec"]["nodeName"] = node
        status = new.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": now_rfc3339(),
            }
        )
        status["conditions"] = conditions
        self._commit(rt, "MODIFIED", new, pod)
        self.stats.pods_bound += 1
        return success

    # --- read ----------------------------------------------------------------------------------------

    async def get(
        self,
        resource: str,
        name: str,
        *,
        namespace: str | None = None,
        client: str = "controller",
        copy: bool = True,
    ) -> dict[str, Any]:
        rt = resource_type(resource)
        self.stats.count_request("get", resource, client, namespace)
        obj = self._existing(rt, self._namespace(rt, namespace), name)
        return deep_copy(obj) if copy else obj

    async def list(
        self,
        resource: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        client: str = "controller",
    ) -> tuple[list[dict[str, Any]], str]:
        items, rv, _ = self.list_page(
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            client=client,
        )
        return [deep_copy(o) for o in items], rv

    def list_page(
        self,
        resource: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        client: str = "controller",
    ) -> tuple[builtins.list[Obj], str, str | None]:
        """One page of matching objects (stored snapshots, not copies), the list resourceVersion and the
        continue token. Pages follow (namespace, name) order; a page continues from the live state."""
        rt = resource_type(resource)
        self.stats.count_request("list", resource, client, namespace)
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector)
        ns = namespace if rt.namespaced and namespace else None
        start: tuple[str, str] | None = None
        list_rv = self.store.rv
        if continue_token:
            start, list_rv = self._decode_continue(continue_token)
        candidates = self.store.iter(resource, ns)
        if fields.exact("metadata.name") is not None and ns is not None:
            single = self.store.get(resource, ns, fields.exact("metadata.name") or "")
            candidates = iter([single] if single else [])
        matched = [
            o
            for o in candidates
            if (labels.empty or labels.matches(o["metadata"].get("labels"))) and fields.matches(o)
        ]
        if limit is None and start is None:
            matched.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
            return matched, str(list_rv), None
        keyed = [((o["metadata"].get("namespace", ""), o["metadata"]["name"]), o) for o in matched]
        if start is not None:
            keyed = [(k, o) for k, o in keyed if k > start]
        if limit is not None and limit > 0 and len(keyed) > limit:
            # The first `limit` keys only: a page of 500 out of 15,000 nodes is not worth a full sort (which
            # each of the 30 pages of a paginated list would repeat).
            page = heapq.nsmallest(limit, keyed, key=_first)
            return [o for _, o in page], str(list_rv), self._encode_continue(page[-1][0], list_rv)
        keyed.sort(key=_first)
        return [o for _, o in keyed], str(list_rv), None

    @staticmethod
    def _encode_continue(last: tuple[str, str], rv: int) -> str:
        raw = json.dumps({"v": "kubesim/v1", "rv": rv, "start": list(last)}).encode()
        return base64.urlsafe_b64encode(raw).decode()

    def _decode_continue(self, token: str) -> tuple[tuple[str, str], int]:
        try:
            data = json.loads(base64.urlsafe_b64decode(token.encode()))
            start = (str(data["start"][0]), str(data["start"][1]))
            rv = int(data["rv"])
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise bad_request(f"continue key is not valid: {exc}") from exc
        return start, rv

    # --- update / patch ------------------------------------------------------------------------------

    async def update(
        self,
        resource: str,
        obj: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        client: str = "controller",
        dry_run: bool = False,
        copy: bool = True,
    ) -> dict[str, Any]:
        rt = resource_type(resource)
        self.stats.count_request(
            "update", _sub(resource, subresource), client, _request_namespace(namespace, obj)
        )
        if not isinstance(obj, dict):
            raise bad_request("the body of the request must be a JSON object")
        obj = deep_copy(obj)
        self._type_meta(rt, obj)
        ns = self._namespace(rt, namespace, obj)
        name = str((obj.get("metadata") or {}).get("name") or "")
        unconditional = not (obj.get("metadata") or {}).get("resourceVersion")
        for _ in range(MAX_RACE_RETRIES):
            old = self._existing(rt, ns, name)
            try:
                result = await self._commit_update(
                    rt, ns, old, obj, subresource, dry_run=dry_run, client=client, unconditional=unconditional
                )
            except _Raced:
                continue
            return deep_copy(result) if copy else result
        raise conflict(rt.plural, name, rt.group)

    async def patch(
        self,
        resource: str,
        name: str,
        patch: Any,
        *,
        patch_type: PatchType = "merge",
        namespace: str | None = None,
        subresource: str | None = None,
        client: str = "controller",
        dry_run: bool = False,
        copy: bool = True,
    ) -> dict[str, Any]:
        rt = resource_type(resource)
        self.stats.count_request("patch", _sub(resource, subresource), client, namespace)
        ns = self._namespace(rt, namespace, patch if isinstance(patch, dict) else None)
        old = self.store.get(rt.plural, ns, name)
        if old is None:
            if patch_type != "apply" or subresource:
                raise not_found(rt.plural, name, rt.group)
            if not isinstance(patch, dict):
                raise bad_request("an apply patch must be an object")
            body = deep_copy(patch)
            body.setdefault("metadata", {})["name"] = name
            created = await self._create(rt, ns, body, dry_run=dry_run, client=client)
            return deep_copy(created) if copy else created
        if patch_type == "apply" and isinstance(patch, dict):
            self._type_meta(rt, dict(patch))
        unconditional = not self._patch_sets_rv(patch)
        for _ in range(MAX_RACE_RETRIES):
            new = apply_patch(old, patch, patch_type)
            if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
                raise bad_request("the patch produced an invalid object")
            meta = new["metadata"]
            if meta.get("name") != name or (rt.namespaced and meta.get("namespace") != ns):
                raise bad_request("the patch may not change metadata.name or metadata.namespace")
            if patch_type != "json" and unconditional:
                meta["resourceVersion"] = old["metadata"]["resourceVersion"]
            try:
                result = await self._commit_update(
                    rt, ns, old, new, subresource, dry_run=dry_run, client=client, unconditional=unconditional
                )
            except _Raced:
                old = self._existing(rt, ns, name)
                continue
            if not subresource and not dry_run:
                if resource == "pods":
                    self.stats.pods_patched += 1
                elif resource == "jobs":
                    self.stats.jobs_patched += 1
            return deep_copy(result) if copy else result
        raise conflict(rt.plural, name, rt.group)

    @staticmethod
    def _patch_sets_rv(patch: Any) -> bool:
        return isinstance(patch, dict) and "resourceVersion" in (patch.get("metadata") or {})

    async def _commit_update(
        self,
        rt: ResourceType,
        ns: str,
        old: Obj,
        new: Obj,
        subresource: str | None,
        *,
        dry_run: bool,
        client: str,
        unconditional: bool = False,
    ) -> Obj:
        """Admission, validation and the write. `unconditional` (no resourceVersion in the request): when
        another write lands while admission is awaited, raise _Raced so the caller re-applies to the fresh
        object, as kube-apiserver's GuaranteedUpdate does; otherwise that is a 409 Conflict."""
        name = old["metadata"]["name"]
        if subresource and subresource != "status":
            raise ApiError(405, "MethodNotAllowed", f"update is not supported on {rt.plural}/{subresource}")
        wanted_rv = (new.get("metadata") or {}).get("resourceVersion")
        if wanted_rv and str(wanted_rv) != old["metadata"]["resourceVersion"]:
            raise conflict(rt.plural, name, rt.group)
        if subresource == "status":
            merged = deep_copy(old)
            merged["status"] = new.get("status") or {}
            new = merged
        else:
            new = deep_copy(new)
            new["kind"], new["apiVersion"] = rt.kind, rt.api_version
            meta = new.setdefault("metadata", {})
            for key in _UNCHANGED_ON_UPDATE:
                if key in old["metadata"]:
                    meta[key] = old["metadata"][key]
                else:
                    meta.pop(key, None)
            meta["name"] = name
            if rt.namespaced:
                meta["namespace"] = ns
            if rt.plural in RESOURCES_WITH_STATUS:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
        warnings: list[str] = []
        req = self._admission_request(
            "UPDATE", rt, subresource or "", ns, name, new, old, dry_run=dry_run, client=client
        )
        try:
            if not subresource:
                self._admit_builtin("UPDATE", rt, new, old)
            mutated = await self.admission.mutate(req, warnings)
            new = mutated if mutated is not None else new
            causes = validate_update(rt.plural, old, new) if not subresource else []
            if causes:
                raise invalid(rt.kind, rt.group, name, causes)
            req.obj = new
            if not subresource:
                self._validate_builtin("UPDATE", rt, new)
            await self.admission.validate(req, warnings)
        finally:
            self._warn(warnings)
        current = self.store.get(rt.plural, ns, name)
        if current is None:
            raise not_found(rt.plural, name, rt.group)
        if current is not old:
            if unconditional:
                raise _Raced
            raise conflict(rt.plural, name, rt.group)
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:
            return old
        if not subresource and any(
            new.get(k) != old.get(k) for k in set(new) | set(old) if k not in ("metadata", "status")
        ):
            new["metadata"]["generation"] = int(old["metadata"].get("generation") or 1) + 1
        if dry_run:
            return new
        if self._delete_during_update(old, new):
            self._commit(rt, "DELETED", new, old)
            self._after_delete(rt, new, "Background")
            return new
        return self._commit(rt, "MODIFIED", new, old)

    # --- delete --------------------------------------------------------------------------------------

    @staticmethod
    def _delete_during_update(old: Obj, new: Obj) -> bool:
        """registry.ShouldDeleteDuringUpdate: the update removed the last finalizer of an object whose
        deletion was requested with no (or an expired, 0 s) grace period."""
        old_meta = old["metadata"]
        return (
            not new["metadata"].get("finalizers")
            and bool(old_meta.get("deletionTimestamp"))
            and not old_meta.get("deletionGracePeriodSeconds")
        )

    @staticmethod
    def _grace_period(rt: ResourceType, obj: Obj, requested: int | None) -> int:
        """The deletion grace period (rest.BeforeDelete with the pod strategy's CheckGracefulDelete): a pod's
        requested or spec period (default 30 s), 0 for an unbound or terminal pod; 0 for everything else."""
        if rt.plural != "pods":
            return 0
        if not obj["spec"].get("nodeName") or (obj.get("status") or {}).get("phase") in TERMINAL_PHASES:
            return 0
        if requested is not None:
            return max(0, requested)
        period = obj["spec"].get("terminationGracePeriodSeconds")
        return 30 if period is None else int(period)

    async def delete(
        self,
        resource: str,
        name: str,
        *,
        namespace: str | None = None,
        grace_period_seconds: int | None = None,
        client: str = "controller",
        dry_run: bool = False,
        propagation_policy: str | None = None,
        precondition_rv: str | None = None,
        precondition_uid: str | None = None,
        copy: bool = True,
    ) -> dict[str, Any]:
        rt = resource_type(resource)
        self.stats.count_request("delete", resource, client, namespace)
        ns = self._namespace(rt, namespace)
        old = self._existing(rt, ns, name)
        result = self._delete(
            rt,
            old,
            grace_period_seconds=grace_period_seconds,
            dry_run=dry_run,
            propagation_policy=propagation_policy,
            precondition_rv=precondition_rv,
            precondition_uid=precondition_uid,
        )
        return deep_copy(result) if copy else result

    def _delete(
        self,
        rt: ResourceType,
        old: Obj,
        *,
        grace_period_seconds: int | None,
        dry_run: bool,
        propagation_policy: str | None,
        precondition_rv: str | None = None,
        precondition_uid: str | None = None,
    ) -> Obj:
        meta = old["metadata"]
        if precondition_uid and precondition_uid != meta.get("uid"):
            raise conflict(
                rt.plural,
                meta["name"],
                rt.group,
                f"Precondition failed: UID in precondition: {precondition_uid}, "
                f"UID in object meta: {meta.get('uid')}",
            )
        if precondition_rv and precondition_rv != meta.get("resourceVersion"):
            raise conflict(rt.plural, meta["name"], rt.group)
        if dry_run:
            return old
        if meta.get("deletionTimestamp"):
            return self._delete_again(rt, old, grace_period_seconds, propagation_policy or "Background")
        grace = self._grace_period(rt, old, grace_period_seconds)
        if grace > 0 or meta.get("finalizers"):
            new = deep_copy(old)
            new["metadata"]["deletionTimestamp"] = now_rfc3339()
            new["metadata"]["deletionGracePeriodSeconds"] = grace
            return self._commit(rt, "MODIFIED", new, old)
        return self._remove(rt, old, propagation_policy or "Background")

    def _delete_again(self, rt: ResourceType, old: Obj, requested: int | None, policy: str) -> Obj:
        """A delete of an object already being deleted (rest.BeforeDelete): only a shorter grace period
        changes anything; reaching 0 s removes the object unless finalizers are pending, which then hold it
        with a 0 s period (so removing the last one deletes it)."""
        meta = old["metadata"]
        current = int(meta.get("deletionGracePeriodSeconds") or 0)
        if current == 0 or requested is None or requested >= current:
            return old
        shorter = max(0, requested)
        if shorter == 0 and not meta.get("finalizers"):
            return self._remove(rt, old, policy)
        new = deep_copy(old)
        new["metadata"]["deletionGracePeriodSeconds"] = shorter
        return self._commit(rt, "MODIFIED", new, old)

    def _remove(self, rt: ResourceType, old: Obj, policy: str) -> Obj:
        gone_obj = deep_copy(old)
        self._commit(rt, "DELETED", gone_obj, old)
        self._after_delete(rt, gone_obj, policy)
        return gone_obj

    def _after_delete(self, rt: ResourceType, obj: Obj, policy: str) -> None:
        uid = str(obj["metadata"].get("uid"))
        self._deleted_uids[uid] = None
        if len(self._deleted_uids) > _DELETED_UIDS_KEPT:
            self._deleted_uids.popitem(last=False)
        if rt.plural == "namespaces":
            self._spawn(self._delete_namespace_contents(obj["metadata"]["name"]))
        if uid in self.store.dependents:
            self._spawn(self._collect(uid, orphan=policy == "Orphan"))

    async def _collect(self, owner_uid: str, *, orphan: bool) -> None:
        """Background garbage collection of the dependents of a deleted owner."""
        await asyncio.sleep(0)
        for resource, ns, name in sorted(self.store.dependents.get(owner_uid, set())):
            dependent = self.store.get(resource, ns, name)
            if dependent is None:
                continue
            refs = dependent["metadata"].get("ownerReferences") or []
            rest = [r for r in refs if r.get("uid") != owner_uid]
            try:
                if orphan or any(self._owner_exists(r, ns) for r in rest):
                    await self.patch(
                        resource,
                        name,
                        [{"op": "replace", "path": "/metadata/ownerReferences", "value": rest}],
                        patch_type="json",
                        namespace=ns or None,
                        client="garbage-collector",
                        copy=False,
                    )
                else:
                    await self.delete(
                        resource, name, namespace=ns or None, client="garbage-collector", copy=False
                    )
            except ApiError as exc:
                if exc.status != 404:
                    log.warning("garbage collection of %s %s/%s failed: %s", resource, ns, name, exc)

    def _collect_if_dangling(self, obj: Obj) -> None:
        """A dependent created after its owner was deleted (a controller's create in flight meanwhile) is
        collected like the dependents of a deleted owner, as upstream's garbage collector does when it
        verifies an owner uid it has not seen (k/k pkg/controller/garbagecollector graph_builder.go
        `processGraphChanges`, garbagecollector.go `attemptToDeleteItem`). Deviation: only owners kubesim saw
        deleted count as gone; upstream would also collect a dependent of an owner that never existed."""
        for ref in obj["metadata"].get("ownerReferences") or []:
            if str(ref.get("uid")) in self._deleted_uids:
                self._spawn(self._collect(str(ref.get("uid")), orphan=False))

    def _owner_exists(self, ref: Obj, namespace: str) -> bool:
        uid = ref.get("uid")
        for rs in self.store.resources.values():
            if rs.rt.kind == ref.get("kind"):
                owner = rs.objects.get((namespace if rs.rt.namespaced else "", str(ref.get("name"))))
                return owner is not None and owner["metadata"].get("uid") == uid
        return False

    async def _delete_namespace_contents(self, namespace: str) -> None:
        for rs in self.store.resources.values():
            if not rs.rt.namespaced:
                continue
            for obj in [o for (ns, _), o in rs.objects.items() if ns == namespace]:
                try:
                    self._delete(
                        rs.rt, obj, grace_period_seconds=0, dry_run=False, propagation_policy="Background"
                    )
                except ApiError as exc:
                    log.warning("namespace cleanup of %s failed: %s", obj["metadata"]["name"], exc)

    async def delete_collection(
        self,
        resource: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        client: str = "controller",
        dry_run: bool = False,
        propagation_policy: str | None = None,
    ) -> builtins.list[Obj]:
        rt = resource_type(resource)
        self.stats.count_request("deletecollection", resource, client, namespace)
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector)
        ns = namespace if rt.namespaced and namespace else None
        victims = [
            o
            for o in self.store.iter(resource, ns)
            if labels.matches(o["metadata"].get("labels")) and fields.matches(o)
        ]
        return [
            self._delete(
                rt, o, grace_period_seconds=None, dry_run=dry_run, propagation_policy=propagation_policy
            )
            for o in victims
        ]

    # --- watch ---------------------------------------------------------------------------------------

    def subscribe(
        self,
        resource: str,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        initial: bool = False,
        client: str = "controller",
    ) -> Watcher:
        rt = resource_type(resource)
        self.stats.count_request("watch", resource, client, namespace)
        try:
            rv = int(resource_version) if resource_version not in (None, "") else None
        except ValueError as exc:
            raise bad_request(f"invalid resource version {resource_version!r}") from exc
        return self.store.subscribe(
            resource,
            namespace=namespace if rt.namespaced and namespace else None,
            labels=parse_label_selector(label_selector),
            fields=parse_field_selector(field_selector),
            resource_version=rv,
            initial=initial or rv == 0,
        )

    def unsubscribe(self, resource: str, watcher: Watcher) -> None:
        self.store.unsubscribe(resource, watcher)

    async def watch(
        self,
        resource: str,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        client: str = "controller",
    ) -> AsyncIterator[WatchEvent]:
        watcher = self.subscribe(
            resource,
            namespace=namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
            client=client,
        )
        try:
            while True:
                event_type, obj = await watcher.queue.get()
                if event_type == "ERROR":  # fell too far behind: the caller must re-list
                    raise ApiError(410, "Expired", str(obj.get("message", "watch expired")))
                yield {"type": event_type, "object": deep_copy(obj)}  # type: ignore[typeddict-item]
        finally:
            self.unsubscribe(resource, watcher)
