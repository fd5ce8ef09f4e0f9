"""`ControllerSettings`: every knob of kubesim's controllers, with the upstream default it models.

All durations are simulated seconds; `time_scale` (real seconds per simulated second) compresses them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class ControllerSettings:
    # --- time ---------------------------------------------------------------------------------------
    time_scale: float = 1.0
    """Real seconds per simulated second; 0.01 makes a 60 s backoff last 0.6 s."""
    seed: int = 0
    """Seeds the scheduler's tie-break among equally scored nodes (reproducible placements)."""

    # --- API round trips (every controller) ---------------------------------------------------------
    api_request_latency_seconds: float = 0.01
    """Round trip of one controller request (kube-apiserver + the etcd commit; a bind included), spent
    before the request reaches the API server. A modelling choice: etcd's healthy WAL fsync p99 is < 10 ms
    and the mutating-call SLO (sig-scalability api_call_latency.md) only bounds p99 at 1 s."""
    watch_delivery_seconds: float = 0.01
    """From a commit to the informers' event handlers (watch cache dispatch, the watch stream, the
    reflector's DeltaFIFO). A modelling choice: the watch-latency SLI (sig-scalability
    watch_latency.md) has no SLO yet. Each component has its own informers, as its own process upstream."""

    # --- client-side rate limits (client-go token bucket, one per client; 0 qps = unthrottled) -------
    job_controller_api_qps: float = 20.0
    """kube-controller-manager --kube-api-qps (default 20, pkg/controller/apis/config/v1alpha1/defaults.go):
    every controller gets its own clientset with this budget; the Job controller's pod creates/deletes,
    status writes and Events share it."""
    job_controller_api_burst: int = 30
    """kube-controller-manager --kube-api-burst (default 30)."""
    scheduler_api_qps: float = 50.0
    """kube-scheduler clientConnection.qps (default 50, pkg/scheduler/apis/config/v1/defaults.go): bindings
    and status patches; its Events go through a second clientset with the same budget."""
    scheduler_api_burst: int = 100
    """kube-scheduler clientConnection.burst (default 100)."""
    jobset_api_qps: float = 500.0
    """JobSet's --kube-api-qps (default 500, jobset main.go / api/config/v1alpha1/defaults.go)."""
    jobset_api_burst: int = 500
    """JobSet's --kube-api-burst (default 500)."""

    # --- Job controller (kube-controller-manager pkg/controller/job) --------------------------------
    job_workers: int = 5
    """--concurrent-job-syncs (default 5)."""
    job_sync_backoff_seconds: float = 1.0
    """DefaultJobApiBackOff: first retry delay after a failed sync; doubles per consecutive failure."""
    job_max_sync_backoff_seconds: float = 60.0
    """MaxJobApiBackOff: cap of that doubling. A clean sync resets it."""
    job_pod_update_batch_seconds: float = 1.0
    """syncJobBatchPeriod: a pod add/update/delete re-queues its Job after this delay."""
    job_max_creates_per_sync: int = 500
    """MaxPodCreateDeletePerSync."""
    job_slow_start_initial_batch: int = 1
    """SlowStartInitialBatchSize: creates go out in batches 1, 2, 4, ... ; a failed batch stops the sync."""
    job_pod_failure_backoff_seconds: float = 10.0
    """DefaultJobPodFailureBackOff: delay before re-creating a failed pod; doubles per failure."""
    job_max_pod_failure_backoff_seconds: float = 600.0
    """MaxJobPodFailureBackOff."""
    record_events: bool = True
    """Write Events like the real components (Job controller, JobSet, scheduler, kubelets), through
    client-go's correlator (count patches, aggregation, spam filter) or events.k8s.io series."""

    # --- scheduler (kube-scheduler) -----------------------------------------------------------------
    scheduler_pods_per_second: float = 300.0
    """Scheduling throughput: one scheduling cycle lasts 1/this simulated seconds (0 = instant, unlimited);
    upstream's scheduler_perf CI threshold is ~270 pods/s at 5k nodes. The pod is assumed at the end of its
    cycle and bound asynchronously (pkg/scheduler/schedule_one.go): the next cycle does not wait for the
    binding request."""
    scheduler_initial_backoff_seconds: float = 1.0
    """podInitialBackoffSeconds: an unschedulable pod waits this long before its next attempt."""
    scheduler_max_backoff_seconds: float = 10.0
    """podMaxBackoffSeconds: cap of the per-pod doubling."""
    scheduler_unschedulable_flush_seconds: float = 300.0
    """podMaxInUnschedulablePodsDuration: unschedulable pods are retried at least this often."""
    scheduler_percentage_of_nodes_to_score: int = 0
    """percentageOfNodesToScore; 0 = adaptive (50% - nodes/125, at least 5% and 100 nodes)."""

    # --- kubelet ------------------------------------------------------------------------------------
    kubelet_start_delay_seconds: float = 2.0
    """From bind to Running+Ready (sandbox, image and container start); the Pending/ContainerCreating status
    is written at the bind."""
    kubelet_stop_delay_seconds: float = 1.0
    """From deletionTimestamp to the kubelet's final delete (containers exit on SIGTERM)."""
    pod_run_seconds: float | None = None
    """How long a container runs before exiting 0 (pod Succeeded); None = runs until deleted."""

    # --- JobSet controller --------------------------------------------------------------------------
    jobset_workers: int = 1
    jobset_webhooks: bool = True
    """JobSet's own exclusive-placement pod webhooks (mpod.kb.io, vpod.kb.io) and its pod reconciler, as a
    JobSet install runs them; False leaves JobSet's pods to the other webhooks alone."""

    def __post_init__(self) -> None:
        if not self.time_scale > 0:
            raise ValueError(f"time_scale must be > 0, got {self.time_scale!r}")
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
                raise ValueError(f"{item.name} must not be negative, got {value!r}")
        if self.job_workers < 1 or self.jobset_workers < 1:
            raise ValueError("job_workers and jobset_workers must be at least 1")
        if self.job_slow_start_initial_batch < 1 or self.job_max_creates_per_sync < 1:
            raise ValueError("job_slow_start_initial_batch and job_max_creates_per_sync must be at least 1")
        for qps, burst in (
            ("job_controller_api_qps", "job_controller_api_burst"),
            ("scheduler_api_qps", "scheduler_api_burst"),
            ("jobset_api_qps", "jobset_api_burst"),
        ):
            if getattr(self, qps) > 0 and getattr(self, burst) < 1:
                raise ValueError(f"{burst} must be at least 1 when {qps} is set")
        if self.scheduler_percentage_of_nodes_to_score > 100:
            raise ValueError("scheduler_percentage_of_nodes_to_score must be between 0 and 100")
