"""`python -m devstack run|demo`: the whole system locally (the real control plane + webhook + resizer).

The control plane is the one `make kube` builds: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok's fake nodes and JobSet's controller and webhooks (about 15 s to start once built);
`--control-plane kube` names it, the only choice.

run   brings the stack up, applies a manifest (default examples/jobset-exclusive.yaml), shows progress and
      the placement table, then keeps serving until Ctrl-C (kubectl works against the printed kubeconfig),
      reporting every exclusive Job applied since as it progresses or stalls. One stack per --workdir.
demo  the same, non-interactive: exits 0 with the table when every Job is placed, 1 with the reason if not.
chart `helm lint` / `helm template` of the chart without a helm binary (`python -m devstack chart lint`).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any

from devstack import chart
from devstack.controlplane.binaries import MissingBinaries, require_built
from devstack.controlplane.choice import add_control_plane_argument
from devstack.controlplane.kueue import WaitForPodsReady
from devstack.controlplane.versions import pinned_versions
from devstack.demo import apply, apply_and_follow, follow_forever
from devstack.interrupts import handle_stop_signals
from devstack.processes import ProcessError
from devstack.report import resizer_summary, state_summary
from devstack.scenario import PlacementError, expected_jobs, load_manifests
from devstack.shape import ClusterShape
from devstack.stack import Stack, StackOptions
from devstack.workdir import WorkdirInUse
from placement.constants import DEFAULT_STRATEGY, STRATEGIES

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "jobset-exclusive.yaml"
STALL_SECONDS = 30.0


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m devstack", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    modes = (
        ("run", "bring the stack up, place the example, keep serving until Ctrl-C", ".dev/devstack", 300.0),
        ("demo", "the same, non-interactive: exit 0 when every Job is placed", ".dev/demo", 180.0),
    )
    for name, help_text, workdir, timeout in modes:
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        add_control_plane_argument(cmd)
        cmd.add_argument(
            "-f", "--manifest", type=Path, default=EXAMPLE, help="YAML to apply (default: %(default)s)"
        )
        cmd.add_argument(
            "--namespace", default="default", help="namespace for the manifests (default: %(default)s)"
        )
        cmd.add_argument(
            "--strategy",
            choices=STRATEGIES,
            default=DEFAULT_STRATEGY,
            help="webhook default strategy (default: %(default)s)",
        )
        cmd.add_argument(
            "--controller-manager-qps",
            type=float,
            default=None,
            help="raise kube-controller-manager's client limit above upstream's 20 qps",
        )
        cmd.add_argument(
            "--controller-manager-burst",
            type=int,
            default=None,
            help="raise kube-controller-manager's burst above upstream's 30",
        )
        cmd.add_argument("--nodes", type=int, default=32, help="nodes (default: %(default)s)")
        cmd.add_argument("--pools", type=int, default=8, help="node pools (default: %(default)s)")
        cmd.add_argument("--gpus-per-node", type=int, default=8, help="default: %(default)s")
        cmd.add_argument(
            "--no-jobset-takeover",
            dest="jobset_takeover",
            action="store_false",
            help="the webhook leaves JobSet's exclusive-topology annotation on child Jobs' pod templates, so "
            "JobSet's own pod webhooks and pod reconciler act on the pods too",
        )
        cmd.add_argument(
            "--resizer-replicas",
            type=int,
            default=1,
            help="resizer processes, electing a leader through a Lease in the release namespace as the "
            "chart's do, one too (default: %(default)s)",
        )
        cmd.add_argument(
            "--workdir",
            type=Path,
            default=Path(workdir),
            help="certificates, kubeconfig and logs (default: %(default)s)",
        )
        cmd.add_argument(
            "--timeout",
            type=float,
            default=timeout,
            help="seconds to wait for every Job to be placed (default: %(default)s)",
        )
        cmd.add_argument(
            "--stall-seconds",
            type=positive_seconds,
            default=STALL_SECONDS,
            help="seconds without progress before saying why the Jobs wait: pending reasons with counts "
            "and a hint; said again only when that changes (default: %(default)s)",
        )
        cmd.add_argument(
            "--kueue",
            action="store_true",
            help="also run Kueue (its manager and webhooks, the batch/job and JobSet integrations) with a "
            "ResourceFlavor, a ClusterQueue and a LocalQueue `user-queue` in --namespace: label a JobSet or "
            "Job `kueue.x-k8s.io/queue-name: user-queue` to queue it. elastic still resizes the child Jobs "
            "of a JobSet Kueue queues; a plain Job Kueue queues falls back to gate, with an admission "
            "warning naming Kueue (docs/kueue.md)",
        )
        cmd.add_argument(
            "--kueue-gpu-quota",
            type=int,
            default=64,
            help="with --kueue: the ClusterQueue's nvidia.com/gpu quota (default: %(default)s)",
        )
        cmd.add_argument(
            "--kueue-pods-ready-timeout",
            type=positive_seconds,
            default=None,
            metavar="SECONDS",
            help="with --kueue: Kueue's waitForPodsReady timeout, after which an admitted workload whose "
            "pods are not all ready is evicted and requeued (default: Kueue's, 30 min)",
        )
        cmd.add_argument(
            "--kueue-tas",
            action="store_true",
            help="with --kueue: Topology Aware Scheduling, a Topology of the pools (block = node pool, then "
            "hostname) and a TAS ResourceFlavor for the ClusterQueue (docs/kueue.md)",
        )
        cmd.add_argument("-v", "--verbose", action="store_true", help="log devstack's own steps")
    chart.add_command(sub)
    return parser


def options_from(args: argparse.Namespace) -> StackOptions:
    return StackOptions(
        cluster=ClusterShape(nodes=args.nodes, pools=args.pools, gpus_per_node=args.gpus_per_node),
        default_strategy=args.strategy,
        jobset_takeover=args.jobset_takeover,
        resizer_replicas=args.resizer_replicas,
        workdir=args.workdir.resolve(),
        controller_manager_qps=args.controller_manager_qps,
        controller_manager_burst=args.controller_manager_burst,
        kueue=args.kueue,
        kueue_gpu_quota=args.kueue_gpu_quota,
        kueue_namespaces=tuple(dict.fromkeys(("default", args.namespace))),
        kueue_wait_for_pods_ready=(
            None if args.kueue_pods_ready_timeout is None else WaitForPodsReady(args.kueue_pods_ready_timeout)
        ),
        kueue_tas=args.kueue_tas,
    )


def describe_control_plane(options: StackOptions) -> str:
    versions = pinned_versions()
    shape = options.cluster.describe()
    tas = ", TAS" if options.kueue_tas else ""
    kueue = f", Kueue {versions.kueue} (GPU quota {options.kueue_gpu_quota}{tas})" if options.kueue else ""
    return f"Kubernetes {versions.kubernetes} with kwok and JobSet {versions.jobset}{kueue} ({shape})"


def echo(line: str) -> None:
    print(line, flush=True)


def place(stack: Stack, objects: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """Apply the manifests and follow their Jobs until each is placed; the Jobs' last summary."""
    if not expected_jobs(objects):
        apply(stack, objects, namespace=args.namespace, echo=echo)
        echo("nothing to place: the manifests hold no Job or JobSet")
        return ""
    observation = apply_and_follow(
        stack,
        objects,
        namespace=args.namespace,
        timeout=args.timeout,
        echo=echo,
        stall_seconds=args.stall_seconds,
    )
    echo("")
    echo(observation.table)
    echo("")
    echo(f"every Job placed, each in its own node pool ({len(observation.statuses)} Jobs)")
    echo(resizer_summary(stack.resizer_metrics()) or "resizer: nothing resized")
    return state_summary(observation.statuses)


def serve(stack: Stack, args: argparse.Namespace, start: float, last: str) -> None:
    echo(f"\nserving. kubeconfig: {stack.kubeconfig}")
    echo(f"  kubectl --kubeconfig {stack.kubeconfig} get pods -o wide")
    echo(f"  kubectl --kubeconfig {stack.kubeconfig} apply -f examples/indexed-job.yaml")
    echo(f"  KUBECONFIG={stack.kubeconfig} .venv/bin/kubectl-exclusive_placement status -A")
    echo("Exclusive Jobs of every namespace are reported here as they progress or stall.")
    echo("Ctrl-C stops everything.")
    follow_forever(stack, echo=echo, start=start, stall_seconds=args.stall_seconds, last=last)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "chart":
        return chart.run(args)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per poll request otherwise
    try:
        options = options_from(args)
        objects = load_manifests(args.manifest)
        require_built()
    except (ValueError, PlacementError, MissingBinaries) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    with handle_stop_signals():  # Ctrl-C or SIGTERM: the clean stop, from any safe point
        try:
            echo(
                f"starting {describe_control_plane(options)}, webhook (default strategy {args.strategy}) and "
                f"resizer; logs in {options.workdir}/logs"
            )
            with Stack(options) as stack:
                echo(
                    f"kube-apiserver {stack.server}  webhook {stack.webhook_url}  "
                    f"kubeconfig {stack.kubeconfig}"
                )
                start = time.monotonic()
                last = place(stack, objects, args)
                if args.command == "demo":
                    return 0
                serve(stack, args, start, last)
        except KeyboardInterrupt:
            echo("\nstopped: every process terminated")
            return 130 if args.command == "demo" else 0
        except WorkdirInUse as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        except (PlacementError, ProcessError) as err:
            print(f"\nFAILED: {err}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
