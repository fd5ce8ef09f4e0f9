"""Cluster access shared by both binaries: one order of configuration sources, one attempt per call, one
error shape."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException
from kubernetes.config import incluster_config

from kubekit.client import (
    ClusterConfigError,
    Kube,
    KubeError,
    Timeouts,
    _translate,
    build_api_client,
    cluster_configuration,
    is_conflict,
    is_not_found,
)
from webhook.cache import KubeLiveApi

IN_CLUSTER = "https://10.96.0.1:443"


def kubeconfig(path: Path, server: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return path


@pytest.fixture
def sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Every source present (flag file, $KUBECONFIG, a pod's service account, ~/.kube/config); each case
    removes the ones it does not want."""
    token = tmp_path / "sa" / "token"
    token.parent.mkdir()
    token.write_text("sa-token")
    (tmp_path / "sa" / "ca.crt").write_text("not parsed until a TLS connection")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(tmp_path / "sa" / "ca.crt"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "env.yaml", "https://from-env:6443")))
    return {
        "flag": kubeconfig(tmp_path / "flag.yaml", "https://from-flag:6443"),
        "home": kubeconfig(tmp_path / "home" / ".kube" / "config", "https://from-home:6443"),
    }


@pytest.mark.parametrize(
    ("use_flag", "use_server", "env", "in_cluster", "expected"),
    [
        (True, True, True, True, "http://fake-api:6443"),  # --server wins over everything
        (True, False, True, True, "https://from-flag:6443"),
        (False, False, True, True, "https://from-env:6443"),
        (False, False, False, True, IN_CLUSTER),
        (False, False, False, False, "https://from-home:6443"),
    ],
)
def test_configuration_sources_in_order(
    sources: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    use_flag: bool,
    use_server: bool,
    env: bool,
    in_cluster: bool,
    expected: str,
) -> None:
    if not env:
        monkeypatch.delenv("KUBECONFIG")
    if not in_cluster:
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    configuration = cluster_configuration(
        sources["flag"] if use_flag else None, "http://fake-api:6443/" if use_server else None
    )
    assert configuration.host == expected


def test_no_source_at_all_is_a_clear_error(sources: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    sources["home"].unlink()
    with pytest.raises(
        ClusterConfigError, match=r"not running in a cluster .* pass --kubeconfig or --server"
    ):
        cluster_configuration(None, None)


def test_a_missing_or_broken_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ClusterConfigError, match="does not exist"):
        cluster_configuration(tmp_path / "missing", None)
    broken = tmp_path / "broken"
    broken.write_text("apiVersion: v1\nkind: Config\ncontexts: []\n")
    with pytest.raises(ClusterConfigError, match=str(broken)):
        cluster_configuration(broken, None)


@pytest.fixture
def silent_server() -> Iterator[tuple[str, socket.socket]]:
    """A listening socket that never accepts: the kernel completes each TCP handshake into its backlog, so
    every connection the client made is there to count once its call has returned."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=16)
    yield f"http://127.0.0.1:{listener.getsockname()[1]}", listener
    listener.close()


def connections_made(listener: socket.socket) -> int:
    listener.setblocking(False)
    count = 0
    while True:
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


def test_a_timed_out_call_is_made_exactly_once(silent_server: tuple[str, socket.socket]) -> None:
    """urllib3's default retried a timed-out read 3 times (4 connections, 4x the caller's deadline)."""
    url, listener = silent_server
    kube = Kube(build_api_client(None, url, user_agent="test"), Timeouts(connect=1, read=0.3))
    with pytest.raises(KubeError, match="timed out") as raised:
        kube.get_job("team-a", "trainer")
    assert raised.value.status is None
    assert raised.value.retryable
    assert connections_made(listener) == 1
    live = KubeLiveApi(kube, timeout=0.3)  # the webhook's lookup after a cache miss, with its own timeout
    with pytest.raises(KubeError, match="timed out"):
        live.list_leaders("team-a", "trainer")
    assert connections_made(listener) == 1
    kube.close()


@pytest.mark.parametrize(
    ("error", "status", "reason", "message", "retryable"),
    [
        (
            ApiException(status=409, reason="Conflict", body='{"reason": "Conflict", "message": "stale"}'),
            409,
            "Conflict",
            "stale",
            False,
        ),
        (
            ApiException(status=429, reason="Too Many Requests", body="not json"),
            429,
            "Too Many Requests",
            "not json",
            True,
        ),
        (ConnectionResetError("reset"), None, "ConnectionResetError", "reset", True),
    ],
)
def test_every_failure_is_one_kube_error(
    error: Exception, status: int | None, reason: str, message: str, retryable: bool
) -> None:
    translated = _translate(error)
    assert (translated.status, translated.reason, translated.message) == (status, reason, message)
    assert translated.retryable is retryable
    assert translated.label == (str(status) if status else "connection")


@pytest.mark.parametrize(
    ("status", "not_found", "conflict"),
    [(404, True, False), (409, False, True), (410, False, False), (422, False, False), (None, False, False)],
)
def test_not_found_and_conflict_are_404_and_409_alone(
    status: int | None, not_found: bool, conflict: bool
) -> None:
    error = KubeError(status, "Reason")
    assert (error.not_found, error.conflict) == (not_found, conflict)
    assert (is_not_found(status), is_conflict(status)) == (not_found, conflict)


def test_interrupt_wakes_a_watch_reader_on_a_connection_close_stream() -> None:
    """A watch answered with `Connection: close` (http.client then drops the socket from the connection):
    `interrupt()` from another thread still ends the blocked read at once, not when the server ends the
    watch (`watch_server_seconds`, 60 here). It cost every webhook test a 4-10 s teardown."""
    import threading
    import time

    from tests.support.fake_api import FakeKubeApi

    with FakeKubeApi() as api:
        kube = Kube(build_api_client(None, api.url, user_agent="t"), Timeouts(watch_server_seconds=60))
        stream = kube.watch("pods", namespace=None, label_selector=None, resource_version="1")
        outcome: list[object] = []

        def read() -> None:
            try:
                outcome.extend(stream)
            except Exception as error:  # the informer counts this as a dropped watch
                outcome.append(error)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        # Not a synchronisation (the assertions hold either way): it lets the reader block in recv(),
        # the state the old interrupt() could not end.
        time.sleep(0.3)
        stream.interrupt()
        reader.join(10)  # far under the 60 s the server would hold the watch
        assert not reader.is_alive()
        assert all(isinstance(item, Exception) for item in outcome)
        kube.close()
