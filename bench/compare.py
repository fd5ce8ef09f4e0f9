"""`python -m bench compare KUBESIM_JSON KUBE_JSON [--threshold 0.1]`: every figure of a kubesim strategy
comparison that differs from the real control plane's by more than the threshold, as a Markdown table
(the evidence behind docs/kubesim-fidelity.md, "kubesim against the real control plane").

Scenarios are matched by name and contenders by key. Seconds are compared in the scenario's own time: a
kubesim figure in wall seconds at time scale s is divided by s (its simulated seconds), the real control
plane's are real seconds. A figure that is 0 on one side and not on the other always differs; n/a on one
side only is listed as such.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

COUNTS: tuple[str, ...] = (
    "pod_creates_rejected",
    "api_requests",
    "api_requests_in_namespace",
    "api_writes",
    "admission_calls",
    "jobset_webhook_calls",
    "jobset_webhook_denied",
    "wasted_requests",
    "job_patches",
    "pod_patches",
    "scheduler_attempts",
    "exclusive_violations",
)
SECONDS: tuple[str, ...] = ("seconds_to_all_running", "leader_bind_to_all_running_seconds_p50")
RATIOS: tuple[str, ...] = ("api_requests_in_namespace", "api_writes_in_namespace", "all_webhook_calls")
"""elastic / jobset ratios compared as such (the question the benchmark answers)."""
DEFAULT_THRESHOLD = 0.1


@dataclass(frozen=True)
class Difference:
    scenario: str
    contender: str
    figure: str
    kubesim: float | None
    kube: float | None

    @property
    def change(self) -> str:
        if self.kubesim is None or self.kube is None:
            return "n/a on one side"
        if self.kubesim == 0:
            return "from 0"
        return f"{(self.kube - self.kubesim) / self.kubesim:+.0%}"

    def row(self) -> str:
        cells = [self.scenario, f"`{self.contender}`", self.figure, _cell(self.kubesim), _cell(self.kube)]
        return "| " + " | ".join([*cells, self.change]) + " |"


def _cell(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.2f}" if value != int(value) else f"{int(value):,}"


def differs(kubesim: float | None, kube: float | None, threshold: float) -> bool:
    if kubesim is None or kube is None:
        return (kubesim is None) != (kube is None)
    if kubesim == 0:
        return kube != 0
    return abs(kube - kubesim) / abs(kubesim) > threshold


def _in_scenario_time(value: Any, time_scale: float) -> float | None:
    return None if value is None else round(float(value) / time_scale, 3)


def _figures(scenario: dict[str, Any], result: dict[str, Any]) -> Iterator[tuple[str, float | None]]:
    for key in COUNTS:
        yield key, result.get(key)
    for key in SECONDS:
        yield key, _in_scenario_time(result.get(key), scenario["time_scale"])


def differences(
    kubesim: dict[str, Any], kube: dict[str, Any], *, threshold: float = DEFAULT_THRESHOLD
) -> list[Difference]:
    """Every figure of a scenario and contender both reports ran that differs by more than `threshold`."""
    found: list[Difference] = []
    simulated = {scenario["name"]: scenario for scenario in kubesim["scenarios"]}
    for real in kube["scenarios"]:
        sim = simulated.get(real["name"])
        if sim is None:
            continue
        for contender, real_result in real["results"].items():
            sim_result = sim["results"].get(contender)
            if not sim_result or "error" in sim_result or "error" in real_result:
                continue
            sim_figures = dict(_figures(sim, sim_result))
            for figure, value in _figures(real, real_result):
                if differs(sim_figures[figure], value, threshold):
                    found.append(Difference(real["name"], contender, figure, sim_figures[figure], value))
        for figure in RATIOS:
            sim_ratio = (sim.get("elastic_vs_jobset") or {}).get(figure)
            real_ratio = (real.get("elastic_vs_jobset") or {}).get(figure)
            if differs(sim_ratio, real_ratio, threshold):
                found.append(Difference(real["name"], "elastic / jobset", figure, sim_ratio, real_ratio))
    return found


def markdown(found: Sequence[Difference], threshold: float) -> str:
    lines = [
        f"Figures that differ by more than {threshold:.0%} (kubesim's seconds divided by its time scale):",
        "",
        "| scenario | contender | figure | kubesim | real | change |",
        "|---|---|---|---:|---:|---:|",
        *(difference.row() for difference in found),
    ]
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench compare", description=__doc__)
    parser.add_argument("kubesim", type=Path, help="a kubesim run's strategies.json")
    parser.add_argument("kube", type=Path, help="a --control-plane kube run's strategies.json")
    parser.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        help="relative difference above which a figure is listed (default: %(default)s)",
    )
    return parser


def _load(path: Path, control_plane: str) -> dict[str, Any]:
    try:
        report: dict[str, Any] = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not a readable strategies.json ({err})") from err
    if report.get("control_plane", "kubesim") != control_plane:
        raise ValueError(f"{path}: a {report.get('control_plane')} run, expected {control_plane}")
    return report


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threshold <= 0:
        print("error: --threshold must be > 0", file=sys.stderr)
        return 2
    try:
        kubesim, kube = _load(args.kubesim, "kubesim"), _load(args.kube, "kube")
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(markdown(differences(kubesim, kube, threshold=args.threshold), args.threshold), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
