"""The startup order of JobSets, read once per JobSet (docs/webhook.md, "JobSet child Jobs").

Before shrinking a JobSet's child Job the Job webhook needs two fields of the JobSet: `startupPolicy` and
the replicated Jobs' `dependsOn`. JobSet's API makes both immutable, so what was read for a JobSet uid stays
true for as long as that JobSet exists: the answer is kept by uid (bounded, least recently used out) and a
JobSet costs one GET, on the admission of its first child Job. No informer: the cluster's JobSets are not
watched nor held in memory, and nothing waits for JobSet's CRD to be installed. A GET that fails (or finds
another uid) is not kept; that Job falls back to `gate` with a warning that says why.

The answer also carries the JobSet's strategy and all-or-nothing annotations. Annotations can change, but
these two may not: the JobSet validation denies an UPDATE that changes them (`placement.jobset_validation`,
`creation_only_changes`), so the answer kept by uid stays the JobSet's and every replica agrees.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from typing import Protocol

from kubekit.client import CustomResource, Kube, KubeError
from placement.constants import JOBSET_GROUP, JOBSET_PLURAL, JOBSET_VERSION
from placement.jobset import JobSetRef, JobSetStartup, JobSetUnknown, OwnerJobSet, jobset_startup
from placement.objects import Obj, metadata
from webhook.metrics import Metrics

DEFAULT_CAPACITY = 4096
JOBSETS = CustomResource(JOBSET_GROUP, JOBSET_VERSION, JOBSET_PLURAL)


class JobSetApi(Protocol):
    def get_jobset(self, namespace: str, name: str) -> Obj: ...


class KubeJobSetApi:
    def __init__(self, kube: Kube, timeout: float) -> None:
        self._kube = kube
        self._timeout = timeout

    def get_jobset(self, namespace: str, name: str) -> Obj:
        return self._kube.get_custom_object(JOBSETS, namespace, name, timeout=self._timeout)


class JobSetSource(Protocol):
    async def startup(self, ref: JobSetRef) -> OwnerJobSet: ...


class JobSetDirectory:
    """`startup(ref)`: the JobSet's startup order, from memory or one live GET."""

    def __init__(self, api: JobSetApi, metrics: Metrics, capacity: int = DEFAULT_CAPACITY) -> None:
        self._api = api
        self._metrics = metrics
        self._capacity = capacity
        self._known: OrderedDict[str, JobSetStartup] = OrderedDict()
        self._lock = threading.Lock()

    def remembered(self, uid: str) -> JobSetStartup | None:
        with self._lock:
            startup = self._known.get(uid)
            if startup is not None:
                self._known.move_to_end(uid)
            return startup

    def _remember(self, uid: str, startup: JobSetStartup) -> None:
        with self._lock:
            self._known[uid] = startup
            self._known.move_to_end(uid)
            while len(self._known) > self._capacity:
                self._known.popitem(last=False)

    async def startup(self, ref: JobSetRef) -> OwnerJobSet:
        if ref.uid:
            known = self.remembered(ref.uid)
            if known is not None:
                self._metrics.jobset_lookups_by("memory").inc()
                return known
        return await asyncio.to_thread(self._read, ref)

    def _read(self, ref: JobSetRef) -> OwnerJobSet:
        try:
            jobset = self._api.get_jobset(ref.namespace, ref.name)
        except KubeError as error:
            self._metrics.jobset_lookups.labels("not_found" if error.not_found else "error").inc()
            return JobSetUnknown(ref, str(error))
        uid = str(metadata(jobset).get("uid") or "")
        if ref.uid and uid != ref.uid:
            self._metrics.jobset_lookups.labels("not_found").inc()
            return JobSetUnknown(ref, f"found uid {uid}, the Job is owned by uid {ref.uid}")
        self._metrics.jobset_lookups.labels("live").inc()
        startup = jobset_startup(jobset)
        if uid:
            self._remember(uid, startup)
        return startup
