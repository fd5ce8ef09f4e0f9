"""`python -m bench <benchmark> [args]`: dispatches to the benchmark's own `main(argv)`.

strategies  JobSet and the four placement strategies side by side on the real control plane, each
            figure decided by repeated runs with --repeat N (bench/strategies.py)
webhook     admission throughput/latency vs a no-op endpoint (bench/webhook_load.py)
resizer     bind-to-resize latency and resizer RSS over 1,000 Jobs (bench/resizer_latency.py)
soak        fault-injection soak of elastic and scheduling-gate (bench/soak.py)
scale       15,000 nodes, 2,000 Jobs: webhook/resizer RSS, admission and bind-to-resize (bench/scale.py)
abuse       one abusive client per attack: webhook peak RSS, a legitimate admission meanwhile (bench/abuse.py)
controlplane  the real control plane's warm start and idle memory (bench/controlplane.py)
fanout      kube-apiserver's CPU placing an elastic JobSet beside 500 resized Jobs, pinning or retired,
            on the policy path of pod admission (bench/fanout.py)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

BENCHMARKS: dict[str, str] = {
    "strategies": "bench.strategies",
    "webhook": "bench.webhook_load",
    "resizer": "bench.resizer_latency",
    "soak": "bench.soak",
    "scale": "bench.scale",
    "abuse": "bench.abuse",
    "controlplane": "bench.controlplane",
    "fanout": "bench.fanout",
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in {"-h", "--help"}:
        print(__doc__)
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in BENCHMARKS:
        print(f"unknown benchmark {name!r}; choose one of: {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    # Imported lazily: each benchmark pulls its own heavy dependencies (matplotlib, load tools).
    try:
        module = importlib.import_module(BENCHMARKS[name])
    except ModuleNotFoundError as err:
        if err.name != BENCHMARKS[name]:
            raise
        print(f"benchmark {name!r} is not available in this checkout ({err.name} missing)", file=sys.stderr)
        return 2
    entry: Callable[[list[str]], int | None] = module.main
    return entry(rest) or 0


if __name__ == "__main__":
    sys.exit(main())
