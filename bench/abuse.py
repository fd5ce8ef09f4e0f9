"""One abusive client against a real webhook process: `python -m bench abuse [--out FILE] [--quick]`.

Replays, one after the other and with bounded counts, the attacks of SECURITY.md's "Availability under
abuse". The first four only ever against 127.0.0.1 (a webhook this command starts, with its production
defaults, against an in-process fake API server):

- `idle-connections`: 4,000 TCP connections that never start TLS, held 12 s;
- `endless-header`: for 10 s, a TLS connection sending an endless header line in 64 KiB writes, again
  whenever the server closes it;
- `expanding-body`: 4 reviews at once of 7.3 MB each whose `spec.x` is `[{},{},...]` (2.4 million objects);
- `slow-bodies`: 256 TLS connections, each sending request headers and then one body byte per second.

Per attack: the webhook's peak RSS while it runs (/proc/<pid>/status, sampled every 20 ms) and how long a
legitimate admission took (a leader pod, on a new TLS connection from 127.0.0.2: another client, as the
API server is another client than a tenant's pod), made in the middle of the attack. Targets: RSS under the
chart's memory limit, the legitimate admission answered (200) within 1 s. `--quick` (the test tier) uses
counts a few times smaller.

The fifth, `dry-run-flood` (`bench.abuse_flood`), goes through kube-apiserver on devstack's real control
plane, where every tenant is the same client to the webhook: one tenant's threads create exclusive pods
with 100,000 empty `nodeSelectorTerms` with `dryRun=All` while another tenant's exclusive pods are timed;
target: the other tenant's admissions answered within 1 s at the 99th percentile. It needs the control
plane build (`make kube`) and is left out of `--quick`.

Results: bench/results/abuse.json; a run of some attacks (`--attack`) replaces only theirs there.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import socket
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.abuse_flood import FLOOD, QUICK_FLOOD, FloodCounts, dry_run_flood
from bench.webhook_load import bodies
from certs.files import write_dev_certs
from devstack.commands import webhook_command
from devstack.ports import free_port
from devstack.processes import ManagedProcess
from devstack.readiness import wait_http_ok
from tests.support.fake_api import FakeKubeApi

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "abuse.json"
CHART_VALUES = ROOT / "charts" / "exclusive-placement" / "values.yaml"
ATTACKER = "127.0.0.1"
LEGIT = "127.0.0.2"
"""All of 127/8 is the loopback interface: the webhook sees this client apart from the attacker."""
TARGET_LEGIT_SECONDS = 1.0
REQUEST_HEAD = b"POST /mutate-pods HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"


@dataclass(frozen=True)
class Counts:
    idle_connections: int = 4_000
    idle_seconds: float = 12.0
    header_seconds: float = 10.0
    expanding_bodies: int = 4
    expanding_objects: int = 2_400_000
    slow_bodies: int = 256
    slow_seconds: float = 12.0


QUICK = Counts(
    idle_connections=600,
    idle_seconds=2.0,
    header_seconds=2.0,
    expanding_bodies=2,
    expanding_objects=600_000,
    slow_bodies=64,
    slow_seconds=2.0,
)


@dataclass
class Outcome:
    peak_rss_mb: float
    baseline_rss_mb: float
    legit_admission_seconds: float
    legit_status: int | str
    memory_limit_mb: float
    within_memory_limit: bool
    legit_within_target: bool
    detail: dict[str, Any]


def chart_memory_limit_mb() -> float:
    limit = str(yaml.safe_load(CHART_VALUES.read_text())["webhook"]["resources"]["limits"]["memory"])
    match = re.fullmatch(r"(\d+)(Mi|Gi)", limit)
    if match is None:
        raise ValueError(f"unexpected memory limit {limit!r} in {CHART_VALUES}")
    return float(match[1]) * (1024 if match[2] == "Gi" else 1) * 1024 * 1024 / 1e6


# --- the webhook and what is read off it ---------------------------------------------------------------


@dataclass
class Target:
    process: ManagedProcess
    port: int
    trust: ssl.SSLContext

    def rss_mb(self) -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
        return kib * 1024 / 1e6

    def client(self, source: str = LEGIT) -> httpx.Client:
        transport = httpx.HTTPTransport(verify=self.trust, local_address=source)
        return httpx.Client(base_url=f"https://127.0.0.1:{self.port}", transport=transport, timeout=30)

    def tls(self) -> ssl.SSLSocket:
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=30, source_address=(ATTACKER, 0))
        return self.trust.wrap_socket(raw, server_hostname="localhost")

    def metric(self, name: str) -> dict[str, float]:
        """The webhook's samples of metric `name`, by label set."""
        with self.client() as client:
            text = client.get("/metrics").text
        return {
            line.split(" ")[0][len(name) :]: float(line.split(" ")[-1])
            for line in text.splitlines()
            if line.startswith(name)
        }


@contextlib.contextmanager
def webhook(workdir: Path) -> Iterator[Target]:
    cert_dir = workdir / "certs"
    write_dev_certs(
        cert_dir, "exclusive-placement-webhook", "exclusive-placement", ["localhost"], ["127.0.0.1"]
    )
    with FakeKubeApi() as api:
        port = free_port()
        argv = webhook_command(port=port, cert_dir=cert_dir, server=api.url)
        process = ManagedProcess("webhook", argv, workdir / "webhook.log")
        process.start()
        try:
            wait_http_ok(process, f"https://127.0.0.1:{port}/readyz", 60, ca_file=cert_dir / "ca.crt")
            yield Target(process, port, ssl.create_default_context(cafile=str(cert_dir / "ca.crt")))
        finally:
            process.stop()


class PeakRss:
    """Samples the webhook's RSS every 20 ms in a thread while the block runs."""

    def __init__(self, target: Target) -> None:
        self._target = target
        self._stop = threading.Event()
        self.peak = 0.0
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._target.rss_mb())
            self._stop.wait(0.02)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._target.rss_mb())


def legit_admission(target: Target) -> tuple[float, int | str]:
    """A leader pod's admission on a new connection from `LEGIT`: (seconds, HTTP status or error)."""
    body = bodies()["mutate-leader"]
    started = time.perf_counter()
    try:
        with target.client() as client:
            status: int | str = client.post(
                "/mutate-pods", content=body, headers={"Content-Type": "application/json"}
            ).status_code
    except httpx.HTTPError as err:
        status = type(err).__name__
    return time.perf_counter() - started, status


def wait_quiet(target: Target, timeout: float = 60) -> None:
    """Until the webhook holds no connection but the poller's own (the previous attack's are gone)."""
    deadline = time.monotonic() + timeout
    while target.metric("exclusive_placement_connections_open").get("", 0.0) > 1:
        if time.monotonic() > deadline:
            raise RuntimeError("the webhook still holds the previous attack's connections")
        time.sleep(0.2)


# --- the attacks -------------------------------------------------------------------------------------------

Attack = Callable[[Target, Counts, Callable[[], None]], dict[str, Any]]
"""Runs one attack; calls its third argument (the legitimate admission) once the attack is under way."""


def idle_connections(target: Target, counts: Counts, legit: Callable[[], None]) -> dict[str, Any]:
    held: list[socket.socket] = []
    refused = 0
    try:
        for _ in range(counts.idle_connections):
            try:
                held.append(
                    socket.create_connection(
                        ("127.0.0.1", target.port), timeout=5, source_address=(ATTACKER, 0)
                    )
                )
            except OSError:
                refused += 1
        legit()
        time.sleep(counts.idle_seconds)  # shapes the attack: the connections are held this long
        still_open = sum(1 for sock in held if _open(sock))
    finally:
        for sock in held:
            sock.close()
    return {"connections": counts.idle_connections, "connect_refused": refused, "open_at_the_end": still_open}


def _open(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def endless_header(target: Target, counts: Counts, legit: Callable[[], None]) -> dict[str, Any]:
    answers: list[bytes] = []
    sent = 0
    stop_at = time.monotonic() + counts.header_seconds
    legit_thread = threading.Timer(counts.header_seconds / 2, legit)
    legit_thread.start()
    while time.monotonic() < stop_at:
        with contextlib.closing(target.tls()) as tls:
            tls.sendall(REQUEST_HEAD + b"X-Filler: ")
            with contextlib.suppress(OSError):
                while time.monotonic() < stop_at:
                    tls.sendall(b"a" * 65536)
                    sent += 65536
            with contextlib.suppress(OSError):
                answers.append(tls.recv(200))
    legit_thread.join()
    statuses = sorted({answer.split(b"\r\n", 1)[0].decode(errors="replace") for answer in answers})
    return {"connections": len(answers), "bytes_sent": sent, "answers": statuses}


def expanding_body(target: Target, counts: Counts, legit: Callable[[], None]) -> dict[str, Any]:
    review = json.loads(bodies()["mutate-leader"])
    review["request"]["object"]["spec"]["x"] = "EXPAND"
    body = (
        json.dumps(review)
        .encode()
        .replace(b'"EXPAND"', b"[" + b",".join([b"{}"] * counts.expanding_objects) + b"]")
    )
    statuses: list[int | str] = []

    def post() -> None:
        try:
            with target.client(ATTACKER) as client:
                response = client.post(
                    "/mutate-pods", content=body, headers={"Content-Type": "application/json"}
                )
                statuses.append(response.status_code)
        except httpx.HTTPError as err:
            statuses.append(type(err).__name__)

    posters = [threading.Thread(target=post) for _ in range(counts.expanding_bodies)]
    for thread in posters:
        thread.start()
    legit()
    for thread in posters:
        thread.join()
    return {"bodies": counts.expanding_bodies, "body_bytes": len(body), "answers": sorted(map(str, statuses))}


def slow_bodies(target: Target, counts: Counts, legit: Callable[[], None]) -> dict[str, Any]:
    connections: list[ssl.SSLSocket] = []
    try:
        for _ in range(counts.slow_bodies):
            tls = target.tls()
            tls.sendall(REQUEST_HEAD + b"Content-Length: 5000\r\n\r\n{")
            connections.append(tls)
        legit()
        stop_at = time.monotonic() + counts.slow_seconds
        while time.monotonic() < stop_at:
            for tls in connections:
                with contextlib.suppress(OSError):
                    tls.sendall(b" ")
            time.sleep(1.0)  # shapes the attack: one byte per connection per second
        answers = set()
        for tls in connections:
            tls.settimeout(0.1)
            with contextlib.suppress(OSError):
                answers.add(tls.recv(200).split(b"\r\n", 1)[0].decode(errors="replace"))
    finally:
        for tls in connections:
            tls.close()
    return {"connections": counts.slow_bodies, "answers_seen": sorted(answers)}


ATTACKS: dict[str, Attack] = {
    "idle-connections": idle_connections,
    "endless-header": endless_header,
    "expanding-body": expanding_body,
    "slow-bodies": slow_bodies,
}


def run_attack(target: Target, name: str, counts: Counts, limit_mb: float) -> Outcome:
    wait_quiet(target)
    baseline = target.rss_mb()
    closed_before = target.metric("exclusive_placement_connections_closed_total")
    legit: dict[str, Any] = {}

    def admit() -> None:
        legit["seconds"], legit["status"] = legit_admission(target)

    with PeakRss(target) as rss:
        detail = ATTACKS[name](target, counts, admit)
    closed_after = target.metric("exclusive_placement_connections_closed_total")
    detail["closed_by_the_server"] = {
        labels: after - closed_before.get(labels, 0.0)
        for labels, after in closed_after.items()
        if after != closed_before.get(labels, 0.0)
    }
    return Outcome(
        peak_rss_mb=round(rss.peak, 1),
        baseline_rss_mb=round(baseline, 1),
        legit_admission_seconds=round(legit["seconds"], 3),
        legit_status=legit["status"],
        memory_limit_mb=round(limit_mb, 1),
        within_memory_limit=rss.peak < limit_mb,
        legit_within_target=legit["status"] == 200 and legit["seconds"] <= TARGET_LEGIT_SECONDS,
        detail=detail,
    )


def run(counts: Counts, attacks: list[str]) -> dict[str, Outcome]:
    limit = chart_memory_limit_mb()
    with tempfile.TemporaryDirectory(prefix="bench-abuse-") as workdir, webhook(Path(workdir)) as target:
        return {name: run_attack(target, name, counts, limit) for name in attacks}


def report(results: dict[str, Outcome]) -> bool:
    for name, outcome in results.items():
        verdict = "ok" if outcome.within_memory_limit and outcome.legit_within_target else "TARGET MISSED"
        print(
            f"{name:17s} peak RSS {outcome.peak_rss_mb:6.1f} MB (from {outcome.baseline_rss_mb:.1f}, limit "
            f"{outcome.memory_limit_mb:.0f})  legitimate admission {outcome.legit_status} in "
            f"{outcome.legit_admission_seconds:.3f} s  {verdict}"
        )
    return all(o.within_memory_limit and o.legit_within_target for o in results.values())


def report_flood(flood: dict[str, Any]) -> bool:
    for phase, figures in (
        ("default flow control", flood["default_flow_control"]),
        (f"tenants' level, {flood['tenant_seats']} seats", flood),
    ):
        during = figures["legit_during"]
        print(
            f"{FLOOD:17s} [{phase}] {figures['attack_requests']} attack pods from {figures['attackers']} "
            f"threads ({figures['attack_answers']}); legitimate exclusive admissions p50 "
            f"{during['p50_seconds']:.3f} s, p99 {during['p99_seconds']:.3f} s, "
            f"max {during['max_seconds']:.3f} s over {during['count']} ({during['statuses']})  "
            f"{'ok' if figures['legit_within_target'] else 'TARGET MISSED'}"
        )
    return bool(flood["legit_within_target"])


def write(out: Path, results: dict[str, Any]) -> None:
    """The results of the attacks run, over those of a previous run of the others."""
    previous = json.loads(out.read_text()) if out.is_file() else {}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(previous | results, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench abuse", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"results JSON (default {DEFAULT_OUT})")
    parser.add_argument("--quick", action="store_true", help="counts a few times smaller (the test tier)")
    parser.add_argument(
        "--attack", action="append", choices=[*ATTACKS, FLOOD], help="only this attack (repeatable)"
    )
    parser.add_argument(
        "--flood-threads", type=int, default=FloodCounts.attackers, help="attacker threads of the flood"
    )
    parser.add_argument(
        "--flood-seconds", type=float, default=FloodCounts.seconds, help="how long the flood lasts"
    )
    parser.add_argument(
        "--tenant-shares",
        type=int,
        default=FloodCounts.tenant_shares,
        help="nominalConcurrencyShares of the tenants' level in the flood's second half (1: 3 seats)",
    )
    args = parser.parse_args(argv)
    if args.tenant_shares < 1:
        parser.error("--tenant-shares must be at least 1")
    chosen = args.attack or [*ATTACKS, *([] if args.quick else [FLOOD])]
    local = [name for name in chosen if name in ATTACKS]
    results = run(QUICK if args.quick else Counts(), local) if local else {}
    met = report(results)
    written: dict[str, Any] = {name: asdict(outcome) for name, outcome in results.items()}
    if FLOOD in chosen:
        shape = (
            QUICK_FLOOD
            if args.quick
            else FloodCounts(args.flood_threads, seconds=args.flood_seconds, tenant_shares=args.tenant_shares)
        )
        written[FLOOD] = dry_run_flood(shape)
        met = report_flood(written[FLOOD]) and met
    write(args.out, written)
    print(f"results: {args.out}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
