"""Whether a topology key names a label some node carries (docs/design.md, "Saying what is wrong").

A leader exclusive on a label no node carries can never be scheduled: the scheduler's pod affinity needs
the label on the node. The webhook knows every node's labels (its node cache), so it warns at admission
instead of leaving the Job Pending without a word. Only a warning: nodes may be added with the label later
(an autoscaled node pool), and with no node known at all (a cluster scaled to zero) nothing is said.

- `unknown_topology_warning(topology_key, node_label_keys)`: the warning, or None.
- `with_topology_warning(verdict, job, node_label_keys)`: an allowed Job admission verdict with that warning
  added when the Job's topology key is unknown.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection
from dataclasses import replace

from placement.admission import Verdict, in_node_selector_mode
from placement.objects import Obj, topology_key_of_job


def unknown_topology_warning(topology_key: str, node_label_keys: Collection[str]) -> str | None:
    if not node_label_keys or topology_key in node_label_keys:
        return None
    close = difflib.get_close_matches(topology_key, sorted(node_label_keys), n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    return (
        f"exclusive placement: no node carries the label {topology_key} (the topology key), so the leader "
        f"cannot be scheduled until one does{hint}"
    )


def with_topology_warning(verdict: Verdict, job: Obj, node_label_keys: Collection[str]) -> Verdict:
    topology_key = topology_key_of_job(job)
    if not verdict.allowed or topology_key is None or in_node_selector_mode(job):
        return verdict
    warning = unknown_topology_warning(topology_key, node_label_keys)
    return verdict if warning is None else replace(verdict, warnings=(*verdict.warnings, warning))
