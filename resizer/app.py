"""Wires the resizer together: client, informers, work queue, workers, Lease election, health server."""

from __future__ import annotations

import logging
import signal
import threading
import time
from types import FrameType

from kubekit.client import Kube, Timeouts, build_api_client
from kubekit.election import AlwaysLeader, ElectionConfig, LeaderElector
from kubekit.events import EventRecorder
from kubekit.settings import SettingsError
from kubekit.workqueue import WorkQueue
from resizer.caches import new_caches
from resizer.health import HealthServer
from resizer.informers import resizer_informers
from resizer.manager import Resizer
from resizer.metrics import Metrics
from resizer.recorder import REPORTING_CONTROLLER
from resizer.settings import ResizerSettings, host_name

log = logging.getLogger(__name__)

SHUTDOWN_GRACE = 5.0
"""SIGTERM to exit at most, s: well inside a supervisor's 10 s grace period."""


class ResizerApp:
    def __init__(self, settings: ResizerSettings) -> None:
        self.settings = settings
        self.metrics = Metrics()
        self.health = self._listen(settings)
        api_client = build_api_client(
            settings.kubeconfig,
            settings.server,
            pool_size=2 * settings.concurrency + 8,  # the resize and the followers workers, and the rest
            user_agent="exclusive-placement-resizer",
        )
        self.kube = Kube(
            api_client,
            Timeouts(
                read=settings.request_timeout_seconds, watch_server_seconds=settings.watch_timeout_seconds
            ),
        )
        self.caches = new_caches()
        self.elector: LeaderElector | AlwaysLeader
        if settings.leader_elect:
            self.elector = LeaderElector(
                self.kube,
                ElectionConfig(
                    namespace=settings.election_namespace,
                    name=settings.lease_name,
                    identity=settings.identity,
                    lease_duration=settings.lease_duration_seconds,
                    renew_deadline=settings.renew_deadline_seconds,
                    retry_period=settings.retry_period_seconds,
                ),
                on_started_leading=self._started_leading,
                on_stopped_leading=self._stopped_leading,
            )
        else:
            self.elector = AlwaysLeader(self._started_leading)
        self.events = EventRecorder(
            self.kube,
            self.metrics,
            reporting_controller=REPORTING_CONTROLLER,
            reporting_instance=f"{REPORTING_CONTROLLER}-{host_name()}",
        )
        self.resizer = Resizer(
            self.kube,
            self.caches,
            self.metrics,
            self.elector,
            dry_run=settings.dry_run,
            recorder=self.events,
            new_queue=lambda: WorkQueue(settings.retry_base_delay_seconds, settings.retry_max_delay_seconds),
            gang_timeout=settings.all_or_nothing_timeout_seconds,
            pin_followers=settings.pin_followers_label,
        )
        self.informers = resizer_informers(
            lambda _name: self.kube,
            self.resizer,
            namespace=settings.namespace,
            exempt_namespaces=settings.exempt_namespaces,
            on_restart=self._watch_restarted,
        )
        self._stopped = threading.Event()

    def _listen(self, settings: ResizerSettings) -> HealthServer:
        """The health server's socket, bound first: a port in use is one line naming the flag, not a
        traceback after the API client is built."""
        try:
            return HealthServer(
                settings.metrics_host, settings.metrics_port, self.metrics.registry, self._livez, self._readyz
            )
        except OSError as error:
            raise SettingsError(
                f"--metrics-port: cannot listen on {settings.metrics_host}:{settings.metrics_port} "
                f"({error.strerror or error}); choose another port with --metrics-port "
                "(EXCLUSIVE_PLACEMENT_METRICS_PORT; 0 takes any free one)"
            ) from error

    # --- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> None:
        self.events.start()
        self.health.start()
        log.info(
            "resizer %s starting: namespace=%s exempt=%s dry_run=%s pin_followers_label=%s leader_elect=%s "
            "health port %d",
            self.settings.identity,
            self.settings.namespace or "(all)",
            ",".join(self.settings.exempt_namespaces) or "(none)",
            self.settings.dry_run,
            self.settings.pin_followers_label,
            self.settings.leader_elect,
            self.health.port,
        )
        for informer in self.informers:
            informer.start()

    def wait_for_sync(self, stop: threading.Event) -> bool:
        """Block until every cache is filled once (or `stop` is set); no work is done before that."""
        for informer in self.informers:
            while not informer.synced.wait(0.1):
                if stop.is_set():
                    return False
        log.info(
            "caches synced: %d pending Jobs, %d leaders, %d unbound followers, %d nodes, %d finished Jobs "
            "to retire, %d suspended Jobs to rewind",
            len(self.caches.jobs),
            len(self.caches.leaders),
            len(self.caches.followers),
            len(self.caches.nodes),
            len(self.caches.finished_pinning),
            len(self.caches.suspended_resized),
        )
        return True

    def run(self, stop: threading.Event) -> None:
        self.start()
        try:
            if self.wait_for_sync(stop):
                self.resizer.start_workers(self.settings.concurrency)
                self.elector.start()
                stop.wait()
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        """Stop everything, giving up after SHUTDOWN_GRACE s: a slow API server must not hold the exit."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        log.info("shutting down")
        steps = threading.Thread(target=self._stop_parts, name="shutdown", daemon=True)
        steps.start()
        steps.join(SHUTDOWN_GRACE)
        if steps.is_alive():
            log.warning("shutdown unfinished after %.0fs (slow API server?); exiting anyway", SHUTDOWN_GRACE)
        else:
            log.info("stopped")

    def _stop_parts(self) -> None:
        deadline = time.monotonic() + SHUTDOWN_GRACE

        def remaining() -> float:
            return max(0.0, deadline - time.monotonic())

        # Shares of one budget: per-step timeouts in sequence added up past a supervisor's grace period.
        self.resizer.stop_workers(timeout=remaining() / 4)
        self.events.stop(timeout=remaining() / 4)
        self.elector.stop(release=True, timeout=remaining() / 2)
        self.metrics.is_leader.set(0)
        for informer in self.informers:
            informer.stop()
        for informer in self.informers:
            informer.join(remaining())
        self.health.stop()
        self.kube.close()

    # --- callbacks and probes --------------------------------------------------------------------------

    def _started_leading(self) -> None:
        self.metrics.is_leader.set(1)
        self.resizer.enqueue_all()

    def _stopped_leading(self) -> None:
        self.metrics.is_leader.set(0)

    def _watch_restarted(self, informer: str, reason: str) -> None:
        self.metrics.watch_restarts.labels(informer, reason).inc()

    def _livez(self) -> tuple[bool, str]:
        dead = [informer.name for informer in self.informers if not informer.is_alive()]
        if self.resizer.workers_started and not self.resizer.workers_alive():
            dead.append("workers")
        if not self.events.alive():
            dead.append("event-writer")
        if dead and not self._stopped.is_set():
            return False, f"dead: {', '.join(dead)}"
        return True, "ok"

    def _readyz(self) -> tuple[bool, str]:
        pending = [informer.name for informer in self.informers if not informer.synced.is_set()]
        if pending:
            return False, f"caches not synced: {', '.join(pending)}"
        if self.elector.is_leader() and not self.resizer.workers_alive():
            return False, "leader but workers not running"
        return True, "leader" if self.elector.is_leader() else "standby"


def run(settings: ResizerSettings) -> int:
    stop = threading.Event()

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    ResizerApp(settings).run(stop)
    return 0
