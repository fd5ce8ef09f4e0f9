"""strategies.json → strategies.md (the Results table) and PNG plots (matplotlib, Agg backend).

A figure is shown as its median over the runs with its min-max beside it when they differ; a ratio as its
median with the min-max over the paired runs and its verdict (bench.repeats): a range that crosses 1.0 is
a tie, and one pair decides nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.measures import HEADLINE_METRICS
from bench.queued import KUEUE_HEADLINE_METRICS
from bench.repeats import is_figure, median_of

COLUMNS: tuple[tuple[str, str], ...] = (
    ("pod_creates_rejected", "rejected pod creates"),
    ("wasted_requests", "wasted requests"),
    ("api_requests", "API requests"),
    ("api_requests_in_namespace", "of which JobSet's namespace"),
    ("api_writes", "API writes"),
    ("admission_calls", "project webhook calls"),
    ("jobset_webhook_calls", "JobSet webhook calls"),
    ("jobset_webhook_denied", "JobSet webhook denials"),
    ("job_patches", "Job patches"),
    ("pod_patches", "pod patches"),
    ("scheduler_attempts", "scheduling attempts"),
    ("apiserver_cpu_seconds", "kube-apiserver CPU s"),
    ("admission_policy_seconds", "of which s in admission policies"),
    ("leader_wait_max_seconds", "max s leader waited"),
    ("leader_bind_to_all_running_seconds_p50", "s leader bind → all running p50"),
    ("leader_bind_to_all_running_seconds_p99", "p99"),
    ("seconds_to_all_running", "s to all running"),
    ("exclusive_violations", "violations"),
)
WASTE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("wasted_rejected_creates", "rejected creates"),
    ("wasted_event_writes", "FailedCreate event writes"),
    ("wasted_webhook_lookups", "webhook lookups"),
    ("wasted_requests", "wasted requests"),
    ("waiting_job_minutes", "waiting Job-minutes"),
    ("wasted_requests_per_waiting_job_minute", "wasted per waiting Job-minute"),
)

LONG_WAIT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("waiting_job_minutes", "waiting Job-minutes"),
    ("wasted_requests_per_waiting_job_minute", "wasted per waiting Job-minute"),
    ("leader_bind_to_last_follower_created_seconds_p50", "s leader bind → last follower created p50"),
    ("leader_bind_to_last_follower_created_seconds_max", "max"),
    ("jobs_delayed_by_cache_race", "Jobs delayed by the cache race"),
)

PREEMPTION_COLUMNS: tuple[tuple[str, str], ...] = (
    ("high_priority_all_running", "high priority all running"),
    ("high_priority_seconds_to_all_running", "s to all high-priority pods running"),
    ("pods_preempted", "pods preempted"),
    ("preemptions", "preemptions"),
    ("low_priority_restarts", "low-priority restarts"),
    ("low_priority_state", "low-priority JobSet"),
    ("api_requests", "API requests"),
    ("api_writes", "API writes"),
    ("pod_creates_rejected", "rejected pod creates"),
    ("wasted_requests", "wasted requests"),
    ("exclusive_violations", "violations within a level"),
)


GANG_COLUMNS: tuple[tuple[str, str], ...] = (
    ("jobsets_completed", "JobSets completed"),
    ("seconds_to_all_complete", "s to all complete"),
    ("max_partially_placed_jobsets", "max partially placed JobSets"),
    ("partial_domain_seconds", "partial domain-seconds"),
    ("deadline_seconds", "deadline s"),
    ("api_requests_in_namespace", "API requests (namespace)"),
    ("pod_creates_rejected", "rejected pod creates"),
    ("exclusive_violations", "violations"),
)


KUEUE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("jobsets_completed", "JobSets completed"),
    ("seconds_to_all_complete", "s to all complete"),
    ("admitted_to_all_running_seconds_p50", "s admitted → all running p50"),
    ("admitted_to_all_running_seconds_max", "max"),
    ("handover_seconds_p50", "s completed → next admitted p50"),
    ("max_jobsets_admitted_at_once", "max admitted at once"),
    ("api_requests_in_namespace_without_kueue", "API requests (namespace, without Kueue's)"),
    ("api_writes_in_namespace_without_kueue", "API writes (namespace, without Kueue's)"),
    ("kueue_requests", "Kueue's requests"),
    ("kueue_writes", "Kueue's writes"),
    ("kueue_webhook_calls", "Kueue webhook calls"),
    ("all_webhook_calls", "both projects' webhook calls"),
    ("apiserver_cpu_seconds", "kube-apiserver CPU s"),
    ("pod_creates_rejected", "rejected pod creates"),
    ("elastic_fallback_jobs", "Jobs fallen back to gate"),
    ("exclusive_violations", "violations"),
)


def scenario_label(scenario: dict[str, Any]) -> str:
    label = f"{scenario['jobs']}x{scenario['pods_per_job']} on {scenario['pools']} pools"
    if scenario.get("kueue"):
        quota = scenario.get("kueue_gpu_quota")
        return f"{scenario['jobsets']} JobSets of {label} queued by Kueue (quota {quota} GPUs: one JobSet)"
    if scenario.get("gang"):
        label = f"{scenario['jobsets']} gang JobSets of {label}"
    if scenario.get("long_wait"):
        label += f", long wait (pods run {scenario['pod_run_seconds'] / 60:g} min)"
    elif scenario["contended"]:
        label += ", contended"
    if scenario.get("backlog_pods"):
        label += f", behind a backlog of {scenario['backlog_pods']:,} pods"
    if scenario.get("preemption"):
        label += ", high priority preempting low"
    if scenario.get("pod_start_seconds"):
        label += f", pods start {scenario['pod_start_seconds']:g} s after their bind"
    return label


def _failed(result: dict[str, Any]) -> bool:
    return not result.get("succeeded_runs", 1)


def _rows(
    report: dict[str, Any],
    columns: tuple[tuple[str, str], ...],
    *,
    only: str | None = None,
) -> list[str]:
    header = ["scenario", "strategy", *(title for _, title in columns)]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---", "---"] + ["---:"] * len(columns)) + "|"]
    for scenario in report["scenarios"]:
        if only is not None and not scenario.get(only):
            continue
        label = scenario_label(scenario)
        for strategy, result in scenario["results"].items():
            if _failed(result):
                cells = [f"FAILED: {'; '.join(result.get('errors', []))}"] + [""] * (len(columns) - 1)
            else:
                cells = [_cell(result.get(key)) for key, _ in columns]
            runs = f" ({result['succeeded_runs']}/{result['repeats']} runs)" if result.get("errors") else ""
            lines.append("| " + " | ".join([label, f"`{strategy}`{runs}", *cells]) + " |")
    return lines


def _ratio_cell(ratio: dict[str, Any] | None) -> str:
    if not ratio:
        return "n/a"
    spread = "" if ratio["min"] == ratio["max"] else f" ({ratio['min']:.2f}-{ratio['max']:.2f})"
    return f"{ratio['median']:.2f}{spread} {ratio['verdict']}"


def ratios_table(report: dict[str, Any], key: str, *, kueue: bool = False) -> list[str]:
    """The scenarios' `key` ratios (e.g. elastic_vs_jobset) of the headline figures (with `kueue`: the Kueue
    scenarios' and theirs, else the others'); no lines when no scenario has them (one of the two strategies
    did not run)."""
    metrics = KUEUE_HEADLINE_METRICS if kueue else HEADLINE_METRICS
    header = ["scenario", *(title for _, title in metrics)]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * len(metrics)]
    measured = [
        s
        for s in report["scenarios"]
        if bool(s.get("kueue")) is kueue and any(v is not None for v in (s.get(key) or {}).values())
    ]
    if not measured:
        return []
    for scenario in measured:
        ratios = scenario.get(key) or {}
        cells = [_ratio_cell(ratios.get(metric)) for metric, _ in metrics]
        lines.append("| " + " | ".join([scenario_label(scenario), *cells]) + " |")
    return lines


def per_job_table(report: dict[str, Any]) -> list[str]:
    """Every Job of every long-wait run: its leader's wait, leader bind → last follower created, and its
    follower creations rejected after the leader bound."""
    lines = [
        "| scenario | strategy | run | Job | s leader waited | s leader bind → last follower created "
        "| follower creates rejected after the bind |",
        "|---|---|---:|---|---:|---:|---:|",
    ]
    for scenario in report["scenarios"]:
        if not scenario.get("long_wait"):
            continue
        for strategy, result in scenario["results"].items():
            for number, run in enumerate(result.get("runs", []), start=1):
                for job, figures in (run.get("jobs") or {}).items():
                    cells = [
                        scenario_label(scenario),
                        f"`{strategy}`",
                        str(number),
                        job.rsplit("/", 1)[-1],
                        _cell(figures["leader_wait_seconds"]),
                        _cell(figures["leader_bind_to_last_follower_created_seconds"]),
                        _cell(figures["follower_creates_rejected_after_leader_bound"]),
                    ]
                    lines.append("| " + " | ".join(cells) + " |")
    return lines


def _counters_note(report: dict[str, Any]) -> str:
    versions = report.get("versions") or {}
    repeat = report.get("repeat", 1)
    runs = (
        f"Each figure is the median of {repeat} runs per contender, its min-max in brackets where they "
        "differ. "
        if repeat > 1
        else "Each figure is one run. "
    )
    return runs + (
        f"On the real control plane: kube-apiserver, kube-controller-manager and kube-scheduler "
        f"{versions.get('kube-apiserver', '?')}, etcd {versions.get('etcd', '?')}, JobSet "
        f"{versions.get('jobset', '?')}, {_kueue_version(report)}kwok {versions.get('kwok', '?')}'s nodes; "
        "times are wall seconds. "
        "Counters from JobSet creation to the moment every pod had run: requests, rejected pod creates, "
        "patches and Event writes from the API server's audit log by client, verb, resource and code "
        "(background traffic set aside: `background_requests` in the JSON), webhook calls from "
        "kube-apiserver's `apiserver_admission_webhook_admission_duration_seconds_count`, its CPU seconds "
        "from its `process_cpu_seconds_total`, scheduling attempts and preemptions from kube-scheduler's "
        "metrics."
    )


def _kueue_version(report: dict[str, Any]) -> str:
    if not any(scenario.get("kueue") for scenario in report["scenarios"]):
        return ""
    return f"Kueue {(report.get('versions') or {}).get('kueue', '?')}, "


def _plot_context(report: dict[str, Any]) -> str:
    repeat = report.get("repeat", 1)
    return "real control plane" + (
        f", medians of {repeat} runs (bars: min-max)" if repeat > 1 else ", one run"
    )


def markdown_table(report: dict[str, Any]) -> str:
    lines = _rows(report, COLUMNS)
    lines.append("")
    lines.append(
        _counters_note(report) + ' "max s leader waited": '
        'the longest any leader pod took from creation to bind; "leader bind → all running": per Job, '
        "from its leader's bind to every one of its pods Running, p50 and p99 over the Jobs (nearest "
        'rank); both wall seconds, seen on the pod watch. "wasted requests": the requests rejected pod '
        "creations caused (the table below)."
    )
    if any(scenario.get("backlog_pods") for scenario in report["scenarios"]):
        lines.append(
            "\nBehind a backlog: the JobSet is created once every backlog pod exists; its counters also "
            "count the backlog pods bound and started in that window (the same for every strategy; "
            "`backlog_pods_bound_in_window` in the JSON)."
        )
    lines += ["", "Wasted requests, by cause:", "", *_rows(report, WASTE_COLUMNS), ""]
    lines.append(
        "Rejected creates: pod creates the API server refused; FailedCreate event writes: the Job "
        "controller's Event creates and count patches recording them; webhook lookups: this project's "
        "webhook's live leader lookups for them (two per rejection, at most the lookups it made). Waiting "
        "Job-minutes: the sum over Jobs of the minutes from the leader's creation to its bind."
    )
    if any(scenario.get("long_wait") for scenario in report["scenarios"]):
        lines += ["", "The long wait:", "", *_rows(report, LONG_WAIT_COLUMNS, only="long_wait"), ""]
        lines.append(
            "Leader bind → last follower created: per Job, on the pod watch (negative: the followers existed "
            "before the leader bound, as gated or affinity-placed followers do). Jobs delayed by the cache "
            "race: a follower creation of the Job was rejected after its leader had bound, and its first "
            "follower came more than 2 s after the bind: the rejecting webhook's cache had not seen the "
            "bind, so the Job controller's next try waited for the Job's backoff instead of the 1 s re-queue "
            "an owned pod's update triggers. Every Job of every run:"
        )
        lines += ["", *per_job_table(report), ""]
    if any(scenario.get("preemption") for scenario in report["scenarios"]):
        lines += ["", "Preemption:", "", *_rows(report, PREEMPTION_COLUMNS, only="preemption"), ""]
        lines.append(
            "A low-priority JobSet of the same shape filled every pool (each pod a whole node) before the "
            "window opened and the high-priority JobSet was created; the figures run until every "
            "high-priority pod was Running. Pods preempted: the scheduler's victims; low-priority JobSet: "
            "`restarted-waiting` (JobSet restarted it, its pods wait for free pools), `failed` (its "
            "failurePolicy's restarts ran out), `running`; violations: two Jobs of one priority level in "
            "one pool at once (across levels the higher one preempts)."
        )
    if any(scenario.get("gang") for scenario in report["scenarios"]):
        lines += ["", "Gang JobSets racing for pools:", "", *_rows(report, GANG_COLUMNS, only="gang"), ""]
        lines.append(
            "Every JobSet is one gang whose rendezvous the benchmark plays: its pods start their run only "
            "once all of them run (bench/rendezvous.py). JobSets completed: within the deadline (a deadlock "
            "never completes; the run ends at the deadline); s to all complete: from the JobSets' creation "
            "to the last one's completion, n/a when one did not complete; partially placed: holding a pool "
            "(a pod bound) while some of its pods have not run, max at once and the pool-seconds so held. "
            "Which JobSet held which pool when (first run): gang_domains_<scenario>.png, `domain_timeline` "
            "in each run of the JSON."
        )
    if any(scenario.get("kueue") for scenario in report["scenarios"]):
        lines += ["", "Queued by Kueue:", "", *_rows(report, KUEUE_COLUMNS, only="kueue"), ""]
        lines.append(KUEUE_NOTE)
    for kueue in (False, True):
        for key, title in (
            ("elastic_vs_jobset", "elastic / jobset (below 1: elastic needs less):"),
            ("elastic_vs_gate", "elastic / gate (same webhook transport):"),
        ):
            table = ratios_table(report, key, kueue=kueue)
            if table:
                lines += [
                    "",
                    ("Under Kueue, " + title[0].lower() + title[1:]) if kueue else title,
                    "",
                    *table,
                ]
    lines.append("")
    lines.append(
        "Each ratio: the median over the paired runs (run i of elastic over run i of the other, on the same "
        "stack), the min-max over those pairs in brackets, and the verdict: `lower` or `higher` only when "
        "every pair is on that side of 1.0, `tie` when the range crosses 1.0, `one run` when a single pair "
        "decides nothing. Requests and writes in the ratios are those about the JobSet's namespace (a "
        "backlog's traffic excluded). JobSet's webhooks and this project's are both TLS servers "
        "kube-apiserver calls: times against `jobset` compare like with like."
    )
    return "\n".join(lines) + "\n"


KUEUE_NOTE = (
    "Every JobSet names its namespace's LocalQueue; the ClusterQueue's GPU quota fits one JobSet, so Kueue "
    "admits them one after the other as each completes. Under Kueue `elastic` is elastic: the child Jobs "
    "of a JobSet Kueue queues are created (suspended) at size 1 and resized once their leader binds; Kueue "
    "takes the quota from the JobSet's spec and never checks the child Jobs, but its Job webhooks are called "
    "on each resize (in Kueue webhook calls). Elastic / gate compares it with `gate`, elastic / jobset with "
    "JobSet. "
    "Admitted: the JobSet first seen unsuspended on a JobSet watch; s to all complete: from the JobSets' "
    "creation to the last one's `Completed` condition; admitted → all running: per JobSet, until all of its "
    "pods had run; completed → next admitted: Kueue's and JobSet's reaction. Kueue's requests: those of its "
    "manager's ServiceAccount in the audit log, counted apart from every other figure named 'without "
    "Kueue's'; Kueue webhook calls: kube-apiserver's calls to Kueue's webhooks, in no other webhook figure "
    "(kube-apiserver's CPU seconds include its work for Kueue: they cannot be split)."
)


def _cell(value: Any) -> str:
    if is_figure(value):
        median, low, high = _cell(value["median"]), _cell(value["min"]), _cell(value["max"])
        return median if low == high else f"{median} ({low}-{high})"
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list):
        return ", ".join(_cell(v) for v in value)
    return str(value)


def plot(
    report: dict[str, Any],
    key: str,
    title: str,
    path: Path,
    *,
    relative_to: str | None = None,
    upper_key: str | None = None,
) -> None:
    """Grouped bars per scenario and strategy. With `relative_to`, each value is divided by that strategy's
    value in the same scenario (side-by-side ratios; a linear axis with the reference at 1.0), else the raw
    values on a log axis that still shows zeros. With `upper_key`, that value (e.g. the p99 of a p50 bar)
    is marked above each bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenarios = report["scenarios"]
    strategies = list(dict.fromkeys(s for sc in scenarios for s in sc["results"]))
    width = 0.8 / max(1, len(strategies))
    # Room for each scenario's multi-line label: the backlog one is three lines.
    fig, ax = plt.subplots(figsize=(max(9.0, 1.9 * len(scenarios)), 5), dpi=100)
    highest = 0.0
    for i, strategy in enumerate(strategies):
        xs, ys, errors, upper_xs, uppers = [], [], [], [], []
        for x, scenario in enumerate(scenarios):
            result = scenario["results"].get(strategy, {})
            raw = result.get(key)
            value, low, high = median_of(raw), raw, raw
            if is_figure(raw):
                low, high = raw["min"], raw["max"]
            if relative_to is not None and value is not None:
                reference = median_of(scenario["results"].get(relative_to, {}).get(key))
                value = low = high = value / reference if reference else None
            position = x + (i - (len(strategies) - 1) / 2) * width
            if value is not None:
                xs.append(position)
                ys.append(value)
                errors.append((value - low, high - value))
                highest = max(highest, float(high))
            upper = median_of(result.get(upper_key)) if upper_key else None
            if upper is not None:
                upper_xs.append(position)
                uppers.append(upper)
                highest = max(highest, float(upper))
        color = f"C{i}"  # matplotlib's default cycle: the bars' own colour
        yerr = [[e[0] for e in errors], [e[1] for e in errors]] if any(any(e) for e in errors) else None
        ax.bar(xs, ys, width=width, label=strategy, color=color, yerr=yerr, capsize=2)
        if uppers:
            ax.scatter(upper_xs, uppers, marker="_", s=120, color=color, zorder=3)
    labels = [scenario_label(s).replace(", ", "\n") for s in scenarios]
    ax.set_xticks(range(len(scenarios)), labels, fontsize="small")
    if relative_to is not None:
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_ylim(0, max(1.1, highest * 1.15))
        ax.set_ylabel(f"{title} / {relative_to}'s")
        ax.set_title(f"{title}: median relative to {relative_to}'s median ({_plot_context(report)})")
    else:
        ax.set_yscale("symlog", linthresh=1)  # log scale that still shows the zeros
        ax.set_ylim(0, max(10.0, highest * 3))
        ax.set_ylabel(title.split(", ", maxsplit=1)[0] + "\n(log scale)")
        ax.set_title(f"{title} per strategy ({_plot_context(report)})")
    ax.legend(fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_domain_timeline(scenario: dict[str, Any], path: Path) -> None:
    """One row of bars per contender: which JobSet held which pool when (solid: the JobSet was whole or
    finishing; hatched and pale: partially placed), the deadline as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    results = scenario["results"]
    jobsets = [f"gang-{i}" for i in range(scenario["jobsets"])]
    domains = [f"pool-{i:02d}" for i in range(scenario["pools"])]
    fig, axes = plt.subplots(
        len(results), 1, figsize=(10, 1.0 + 0.45 * len(domains) * len(results)), dpi=100, squeeze=False
    )
    for ax, (strategy, result) in zip(axes[:, 0], results.items(), strict=True):
        first: dict[str, Any] = next((run for run in result.get("runs", []) if "error" not in run), {})
        for holding in first.get("domain_timeline", []):
            row = domains.index(holding["domain"]) if holding["domain"] in domains else len(domains)
            colour = f"C{jobsets.index(holding['jobset']) if holding['jobset'] in jobsets else 9}"
            ax.broken_barh(
                [(holding["from"], holding["to"] - holding["from"])],
                (row - 0.4, 0.8),
                facecolors=colour,
                alpha=0.35 if holding["partial"] else 0.9,
                hatch="//" if holding["partial"] else None,
                edgecolor=colour,
            )
        if first.get("deadline_seconds"):
            ax.axvline(first["deadline_seconds"], color="black", linestyle="--", linewidth=0.8)
        done = first.get("jobsets_completed", "?")
        outcome = f"{done}/{scenario['jobsets']} JobSets completed (first run)" if first else "error"
        ax.set_title(f"{strategy}: {outcome}", fontsize="small", loc="left")
        ax.set_yticks(range(len(domains)), domains, fontsize="small")
        ax.set_ylim(-0.6, len(domains) - 0.4)
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("wall seconds after the JobSets' creation (dashed: deadline)")
    legend = [Patch(facecolor=f"C{i}", label=name) for i, name in enumerate(jobsets)]
    legend.append(Patch(facecolor="white", edgecolor="grey", hatch="//", label="partially placed"))
    fig.suptitle(f"{scenario_label(scenario)}: which JobSet held which pool", fontsize="medium", y=0.99)
    fig.legend(
        handles=legend, fontsize="x-small", loc="upper center", ncol=len(legend), bbox_to_anchor=(0.5, 0.96)
    )
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(path)
    plt.close(fig)


PLOTS: tuple[tuple[str, str, str], ...] = (
    ("api_writes", "API writes", "api_writes.png"),
    ("seconds_to_all_running", "seconds to all pods running", "time_to_running.png"),
    ("pod_creates_rejected", "rejected pod creations", "rejected_creates.png"),
    ("wasted_requests", "wasted requests", "wasted_requests.png"),
    ("leader_bind_to_all_running_seconds_p50", "s leader bind → Job running", "leader_bind_to_running.png"),
)
"""(result key, short title: also the y label, file). A `_p50` key is drawn with its `_p99` as a dash."""
BASELINE = "jobset"


def write_outputs(report: dict[str, Any], out: Path, *, plots: bool = True) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "strategies.json", out / "strategies.md"]
    paths[0].write_text(json.dumps(report, indent=2) + "\n")
    paths[1].write_text(markdown_table(report))
    if plots:
        for key, title, name in PLOTS:
            upper = key.replace("_p50", "_p99") if key.endswith("_p50") else None
            plot(report, key, title + (", p50 (dash: p99)" if upper else ""), out / name, upper_key=upper)
            paths.append(out / name)
        for scenario in report["scenarios"]:
            if scenario.get("gang") and scenario["results"]:
                name = f"gang_domains_{scenario['name']}.png"
                plot_domain_timeline(scenario, out / name)
                paths.append(out / name)
        if any(BASELINE in scenario["results"] for scenario in report["scenarios"]):
            name = f"api_requests_vs_{BASELINE}.png"
            kueue = all(scenario.get("kueue") for scenario in report["scenarios"])
            key = "api_requests_in_namespace_without_kueue" if kueue else "api_requests_in_namespace"
            title = "API requests (JobSet's namespace" + (", without Kueue's)" if kueue else ")")
            plot(report, key, title, out / name, relative_to=BASELINE)
            paths.append(out / name)
    return paths
