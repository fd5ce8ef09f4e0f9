"""kubesim: an embedded, simulated Kubernetes control plane for development, tests and benchmarks.

It speaks enough of the real REST API that the official Python client, kubectl and Helm work against it
unchanged, and it models the Job controller, scheduler, kubelet and JobSet controller closely enough that
strategies can be compared on it. See docs/kubesim.md and docs/design.md ("kubesim").
"""

from kubesim.extra import require_sim_extra

require_sim_extra("kubesim", "celpy", "lark", "google.protobuf", "yaml")
