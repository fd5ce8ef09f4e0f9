"""In-memory fakes of the resizer's API surface (`kubekit.client.Kube`), with real API semantics where it
matters: resourceVersion preconditions (409), missing objects (404), JSON-patch `test` failures (422), and
injected transient failures (429/500/connection)."""

from __future__ import annotations

import copy
import threading
from typing import Any

import jsonpatch

from kubekit.client import KubeError
from resizer.recorder import Outcome

Obj = dict[str, Any]


class FakeKube:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self.version = 100
        self.calls: list[tuple[str, str]] = []
        self.fail_next: list[Exception] = []
        self.timeouts: list[float | None] = []
        self.deleted: list[Obj] = []
        """Pods as they were when deleted (their status shows what was written before the delete)."""
        self.graceful_deletes = False
        """Deleted pods stay, terminating (deletionTimestamp set), as a pod with a grace period does."""

    # --- helpers for tests
    def put(self, kind: str, obj: Obj) -> Obj:
        with self.lock:
            self.version += 1
            stored = copy.deepcopy(obj)
            stored.setdefault("metadata", {})["resourceVersion"] = str(self.version)
            meta = stored["metadata"]
            self.objects[(kind, meta.get("namespace", ""), meta["name"])] = stored
            return copy.deepcopy(stored)

    def stored(self, kind: str, namespace: str, name: str) -> Obj:
        return copy.deepcopy(self.objects[(kind, namespace, name)])

    def count(self, verb: str) -> int:
        return sum(1 for call, _ in self.calls if call == verb)

    def _enter(self, verb: str, what: str) -> None:
        self.calls.append((verb, what))
        if self.fail_next:
            raise self.fail_next.pop(0)

    def _get(self, kind: str, namespace: str, name: str) -> Obj:
        obj = self.objects.get((kind, namespace, name))
        if obj is None:
            raise KubeError(404, "NotFound", f"{kind} {name} not found")
        return obj

    # --- the Kube surface the controller and the elector use
    def get_job(self, namespace: str, name: str) -> Obj:
        with self.lock:
            self._enter("get", f"jobs/{name}")
            return copy.deepcopy(self._get("jobs", namespace, name))

    def patch_job(self, namespace: str, name: str, merge_patch: Obj) -> Obj:
        with self.lock:
            self._enter("patch", f"jobs/{name}")
            job = self._get("jobs", namespace, name)
            wanted = merge_patch.get("metadata", {}).get("resourceVersion")
            if wanted is not None and wanted != job["metadata"]["resourceVersion"]:
                raise KubeError(409, "Conflict", "the object has been modified")
            uid = merge_patch.get("metadata", {}).get("uid")
            if uid is not None and uid != job["metadata"].get("uid"):
                raise KubeError(409, "Conflict", "Precondition failed: UID in precondition")
            job["metadata"].setdefault("labels", {}).update(merge_patch.get("metadata", {}).get("labels", {}))
            job["spec"].update(merge_patch.get("spec", {}))
            self.version += 1
            job["metadata"]["resourceVersion"] = str(self.version)
            return copy.deepcopy(job)

    def get_pod(self, namespace: str, name: str) -> Obj:
        with self.lock:
            self._enter("get", f"pods/{name}")
            return copy.deepcopy(self._get("pods", namespace, name))

    def json_patch_job(self, namespace: str, name: str, json_patch: list[Obj]) -> Obj:
        return self._json_patch("jobs", namespace, name, json_patch)

    def patch_pod(self, namespace: str, name: str, json_patch: list[Obj]) -> Obj:
        return self._json_patch("pods", namespace, name, json_patch)

    def _json_patch(self, kind: str, namespace: str, name: str, json_patch: list[Obj]) -> Obj:
        """A failed `test` (or a bad path) is 422, as kube-apiserver answers; a spec change bumps the
        generation."""
        with self.lock:
            self._enter("patch", f"{kind}/{name}")
            current = self._get(kind, namespace, name)
            try:
                patched = jsonpatch.apply_patch(current, json_patch)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
                raise KubeError(422, "Invalid", str(error)) from error
            self.version += 1
            patched["metadata"]["resourceVersion"] = str(self.version)
            if patched.get("spec") != current.get("spec"):
                patched["metadata"]["generation"] = int(current["metadata"].get("generation") or 1) + 1
            self.objects[(kind, namespace, name)] = patched
            return copy.deepcopy(patched)

    def patch_pod_status(self, namespace: str, name: str, strategic_merge_patch: Obj) -> Obj:
        """Conditions merge by type, as a strategic merge patch of pods/status does."""
        with self.lock:
            self._enter("patch-status", f"pods/{name}")
            pod = self._get("pods", namespace, name)
            conditions = {c["type"]: c for c in pod.setdefault("status", {}).get("conditions") or []}
            for condition in strategic_merge_patch.get("status", {}).get("conditions", []):
                conditions[condition["type"]] = condition
            pod["status"]["conditions"] = list(conditions.values())
            self.version += 1
            pod["metadata"]["resourceVersion"] = str(self.version)
            return copy.deepcopy(pod)

    def delete_pod(self, namespace: str, name: str, uid: str) -> Obj:
        with self.lock:
            self._enter("delete", f"pods/{name}")
            pod = self._get("pods", namespace, name)
            if uid and pod["metadata"].get("uid") != uid:
                raise KubeError(409, "Conflict", "Precondition failed: UID in precondition")
            if self.graceful_deletes:
                if not pod["metadata"].get("deletionTimestamp"):
                    self.deleted.append(copy.deepcopy(pod))
                    pod["metadata"]["deletionTimestamp"] = "2026-05-01T10:00:00Z"
                    self.version += 1
                    pod["metadata"]["resourceVersion"] = str(self.version)
                return copy.deepcopy(pod)
            self.deleted.append(copy.deepcopy(pod))
            del self.objects[("pods", namespace, name)]
            return {"kind": "Status", "status": "Success"}

    def get_node(self, name: str) -> Obj:
        with self.lock:
            self._enter("get", f"nodes/{name}")
            return copy.deepcopy(self._get("nodes", "", name))

    def get_lease(self, namespace: str, name: str, timeout: float | None = None) -> Obj:
        with self.lock:
            self.timeouts.append(timeout)
            self._enter("get", f"leases/{name}")
            return copy.deepcopy(self._get("leases", namespace, name))

    def create_lease(self, namespace: str, lease: Obj, timeout: float | None = None) -> Obj:
        with self.lock:
            self._enter("create", "leases")
            name = lease["metadata"]["name"]
            if ("leases", namespace, name) in self.objects:
                raise KubeError(409, "AlreadyExists", name)
            self.version += 1
            stored = copy.deepcopy(lease)
            stored["metadata"]["resourceVersion"] = str(self.version)
            self.objects[("leases", namespace, name)] = stored
            return copy.deepcopy(stored)

    def replace_lease(self, namespace: str, name: str, lease: Obj, timeout: float | None = None) -> Obj:
        with self.lock:
            self._enter("update", f"leases/{name}")
            current = self._get("leases", namespace, name)
            if lease["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                raise KubeError(409, "Conflict", "stale lease")
            self.version += 1
            stored = copy.deepcopy(lease)
            stored["metadata"]["resourceVersion"] = str(self.version)
            self.objects[("leases", namespace, name)] = stored
            return copy.deepcopy(stored)

    def create_event(self, namespace: str, event: Obj) -> Obj:
        with self.lock:
            self._enter("create", "events")
            name = event["metadata"]["name"]
            if ("events", namespace, name) in self.objects:
                raise KubeError(409, "AlreadyExists", f"events {name} already exists")
            self.version += 1
            stored = copy.deepcopy(event)
            stored["metadata"].update(namespace=namespace, resourceVersion=str(self.version))
            self.objects[("events", namespace, name)] = stored
            return copy.deepcopy(stored)

    def patch_event(self, namespace: str, name: str, strategic_merge_patch: Obj) -> Obj:
        """What a series patch changes: top-level fields, replaced."""
        with self.lock:
            self._enter("patch", f"events/{name}")
            event = self._get("events", namespace, name)
            event.update(copy.deepcopy(strategic_merge_patch))
            self.version += 1
            event["metadata"]["resourceVersion"] = str(self.version)
            return copy.deepcopy(event)

    def events(self) -> list[Obj]:
        """The stored Events, in the order they were created."""
        with self.lock:
            return copy.deepcopy([obj for (kind, _, _), obj in self.objects.items() if kind == "events"])


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Recording:
    """A recorder that keeps what the reconcilers reported, in order."""

    def __init__(self) -> None:
        self.outcomes: list[Outcome] = []

    def record(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
