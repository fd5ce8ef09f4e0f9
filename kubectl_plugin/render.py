"""How `status` prints: kubectl-style tables (default and `-o wide`) and the JSON document (`-o json`).

The JSON document is a stable interface (docs/kubectl-plugin.md, "JSON output"): keys are only ever
added, never renamed or removed, and `reason` takes the values of `placement.status.WaitReason`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from placement.status import DomainStatus, Holder, Waiting

NONE = "<none>"
COLUMN_GAP = "   "


def _holder_document(holder: Holder) -> dict[str, Any]:
    return {
        "namespace": holder.namespace,
        "jobset": holder.jobset or None,
        "job": holder.job,
        "priority": holder.priority,
        "since": holder.since or None,
    }


def status_document(domains: Sequence[DomainStatus], waiting: Sequence[Waiting]) -> dict[str, Any]:
    return {
        "domains": [
            {
                "topology_key": domain.topology_key,
                "domain": domain.domain,
                "schedulable": domain.schedulable,
                "nodes": domain.nodes,
                "holders": [_holder_document(holder) for holder in domain.holders],
            }
            for domain in domains
        ],
        "waiting": [
            {
                "namespace": job.namespace,
                "jobset": job.jobset or None,
                "job": job.job,
                "reason": job.reason.value,
                "message": job.message,
            }
            for job in waiting
        ],
    }


def render_json(domains: Sequence[DomainStatus], waiting: Sequence[Waiting], *, compact: bool = False) -> str:
    """Indented; `compact`: one line (a document per line under `--watch`)."""
    document = status_document(domains, waiting)
    return json.dumps(document, separators=(",", ":")) if compact else json.dumps(document, indent=2)


def table(rows: Sequence[Sequence[str]]) -> str:
    """kubectl's layout: upper-case header, columns padded to their widest cell, three spaces apart."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return "\n".join(
        COLUMN_GAP.join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def domain_state(domain: DomainStatus) -> str:
    if domain.holders:
        return "held" if domain.schedulable else "held,unschedulable"
    return "free" if domain.schedulable else "unschedulable"


def _domain_rows(domains: Sequence[DomainStatus], wide: bool) -> list[list[str]]:
    header = ["TOPOLOGY KEY", "DOMAIN", "STATE", "HELD BY"]
    if wide:
        header += ["JOBSET", "PRIORITY", "SINCE", "NODES"]
    rows = [header]
    for domain in domains:
        for holder in domain.holders or (None,):
            row = [
                domain.topology_key,
                domain.domain,
                domain_state(domain),
                f"{holder.namespace}/{holder.job}" if holder else NONE,
            ]
            if wide:
                row += [
                    (holder.jobset or NONE) if holder else NONE,
                    str(holder.priority) if holder else NONE,
                    (holder.since or NONE) if holder else NONE,
                    str(domain.nodes),
                ]
            rows.append(row)
    return rows


def _waiting_rows(waiting: Sequence[Waiting], all_namespaces: bool) -> list[list[str]]:
    rows = [(["NAMESPACE"] if all_namespaces else []) + ["JOBSET", "JOB", "REASON", "MESSAGE"]]
    for job in waiting:
        row = [job.jobset or NONE, job.job, job.reason.value, job.message]
        rows.append(([job.namespace] if all_namespaces else []) + row)
    return rows


def render_table(
    domains: Sequence[DomainStatus],
    waiting: Sequence[Waiting],
    *,
    scope: str,
    all_namespaces: bool,
    wide: bool,
) -> str:
    """Domains, then the waiting Jobs; `scope` names the namespaces looked at ("in namespace x")."""
    if not domains and not waiting:
        return f"No exclusive Jobs or topology domains found {scope}."
    parts = [table(_domain_rows(domains, wide))] if domains else []
    if waiting:
        parts.append(table(_waiting_rows(waiting, all_namespaces)))
    else:
        parts.append(f"No exclusive Job {scope} is waiting: every one is placed.")
    return "\n\n".join(parts)
