"""strategies.json → strategies.md (the Results table) and PNG plots (matplotlib, Agg backend)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

COLUMNS: tuple[tuple[str, str], ...] = (
    ("pod_creates_rejected", "rejected pod creates"),
    ("pod_creates_accepted", "accepted pod creates"),
    ("api_requests", "API requests"),
    ("api_writes", "API writes"),
    ("admission_calls", "admission calls"),
    ("job_patches", "Job patches"),
    ("pod_patches", "pod patches"),
    ("scheduler_filter_evaluations", "filter evals"),
    ("scheduler_affinity_evaluations", "affinity evals"),
    ("leader_wait_max_seconds", "max s leader waited"),
    ("seconds_to_all_running", "s to all running"),
    ("exclusive_violations", "violations"),
)


def scenario_label(scenario: dict[str, Any], default_time_scale: float | None = None) -> str:
    label = f"{scenario['jobs']}x{scenario['pods_per_job']} on {scenario['pools']} pools"
    if scenario["contended"]:
        label += ", contended"
    if scenario.get("scheduler_pods_per_second"):
        label += f", scheduler {scenario['scheduler_pods_per_second']:g} pods/s"
    if scenario.get("backlog_pods"):
        label += f", behind a backlog of {scenario['backlog_pods']:,} pods"
    scale = scenario.get("time_scale")
    if scale is not None and scale != default_time_scale:
        label += f", time scale {scale:g}"
    return label


def markdown_table(report: dict[str, Any]) -> str:
    header = ["scenario", "strategy", *(title for _, title in COLUMNS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---", "---"] + ["---:"] * len(COLUMNS)) + "|"]
    for scenario in report["scenarios"]:
        for strategy, result in scenario["results"].items():
            if "error" in result:
                cells = [f"FAILED: {result['error']}"] + [""] * (len(COLUMNS) - 1)
            else:
                cells = [_cell(result[key]) for key, _ in COLUMNS]
            label = scenario_label(scenario, report["time_scale"])
            lines.append("| " + " | ".join([label, f"`{strategy}`", *cells]) + " |")
    lines.append("")
    lines.append(
        f"Time scale {report['time_scale']} (real seconds per simulated second) unless the scenario says "
        "otherwise: times are wall seconds on this machine at that scale. Counters are kubesim's "
        '`/debug/stats` from JobSet creation to the moment every pod had run. "max s leader waited": '
        "the longest any leader pod took from creation to bind (wall seconds, seen on the pod watch)."
    )
    if any(scenario.get("backlog_pods") for scenario in report["scenarios"]):
        lines.append(
            "\nBehind a backlog: the JobSet is created once every backlog pod exists; its counters also "
            "count the backlog pods bound and started in that window (the same for every strategy; "
            "`backlog_pods_bound_in_window` in the JSON)."
        )
    return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def plot(report: dict[str, Any], key: str, title: str, path: Path, *, relative_to: str | None = None) -> None:
    """Grouped bars per scenario and strategy. With `relative_to`, each value is divided by that strategy's
    value in the same scenario (side-by-side ratios; a linear axis with the reference at 1.0), else the raw
    values on a log axis that still shows zeros."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenarios = report["scenarios"]
    strategies = list(dict.fromkeys(s for sc in scenarios for s in sc["results"]))
    width = 0.8 / max(1, len(strategies))
    # Room for each scenario's multi-line label: the throttled and backlog ones are four lines.
    fig, ax = plt.subplots(figsize=(max(9.0, 1.9 * len(scenarios)), 5), dpi=100)
    highest = 0.0
    for i, strategy in enumerate(strategies):
        xs, ys = [], []
        for x, scenario in enumerate(scenarios):
            value = scenario["results"].get(strategy, {}).get(key)
            if relative_to is not None and value is not None:
                reference = scenario["results"].get(relative_to, {}).get(key)
                value = value / reference if reference else None
            if value is not None:
                xs.append(x + (i - (len(strategies) - 1) / 2) * width)
                ys.append(value)
                highest = max(highest, float(value))
        ax.bar(xs, ys, width=width, label=strategy)
    labels = [scenario_label(s, report["time_scale"]).replace(", ", "\n") for s in scenarios]
    ax.set_xticks(range(len(scenarios)), labels, fontsize="small")
    if relative_to is not None:
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_ylim(0, max(1.1, highest * 1.15))
        ax.set_ylabel(f"{title} / {relative_to}'s")
        ax.set_title(
            f"{title} relative to {relative_to}, same run (time scale {report['time_scale']} unless noted)"
        )
    else:
        ax.set_yscale("symlog", linthresh=1)  # log scale that still shows the zeros
        ax.set_ylim(0, max(10.0, highest * 3))
        ax.set_ylabel(title + " (log scale)")
        ax.set_title(f"{title} per strategy (time scale {report['time_scale']} unless noted)")
    ax.legend(fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_outputs(report: dict[str, Any], out: Path, *, plots: bool = True) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "strategies.json", out / "strategies.md"]
    paths[0].write_text(json.dumps(report, indent=2) + "\n")
    paths[1].write_text(markdown_table(report))
    if plots:
        for key, title, name in (
            ("api_writes", "API writes", "api_writes.png"),
            ("seconds_to_all_running", "seconds to all pods running", "time_to_running.png"),
            ("pod_creates_rejected", "rejected pod creations", "rejected_creates.png"),
        ):
            plot(report, key, title, out / name)
            paths.append(out / name)
        if any("gate" in scenario["results"] for scenario in report["scenarios"]):
            plot(report, "api_requests", "API requests", out / "api_requests_vs_gate.png", relative_to="gate")
            paths.append(out / "api_requests_vs_gate.png")
    return paths
