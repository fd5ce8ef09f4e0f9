"""`make kube`'s pins, cache layout and error lines, and the replace-line generator (no Go build here: the
build itself runs before the suite, in `make test`, and the kube tier uses what it built)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from devstack.controlplane import build
from devstack.controlplane.binaries import MissingBinaries, require_built
from devstack.controlplane.cluster import NodeHeartbeat, kwokctl_extra_args
from devstack.controlplane.replaces import replace_block, rewrite_replaces, staging_modules, staging_version
from devstack.controlplane.versions import (
    CACHE_ENV,
    GO_MODULE_DIR,
    BuildLayout,
    PinError,
    current_layout,
    module_requirements,
    pinned_versions,
)

GO_MOD = """module example.com/tools

go 1.26.0

require (
\tk8s.io/kubernetes v1.36.3
\tsigs.k8s.io/jobset v0.12.0 // indirect
)

require go.etcd.io/etcd/server/v3 v3.6.16

replace (
\tk8s.io/api => k8s.io/api v0.36.3
)
"""


def test_requirements_are_read_from_blocks_and_single_lines(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text(GO_MOD)
    assert module_requirements(tmp_path / "go.mod") == {
        "k8s.io/kubernetes": "v1.36.3",
        "sigs.k8s.io/jobset": "v0.12.0",
        "go.etcd.io/etcd/server/v3": "v3.6.16",
    }


def test_a_missing_pin_is_named(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text(GO_MOD)
    with pytest.raises(PinError, match=r"pins no version of sigs\.k8s\.io/kwok"):
        pinned_versions(tmp_path)


def test_the_repositorys_pins() -> None:
    versions = pinned_versions()
    assert versions.kubernetes.startswith("v1.36.")
    assert versions.etcd.startswith("v3.6.")
    assert versions.kwok.startswith("v0.8.")
    assert versions.jobset == "v0.12.0"
    assert versions.toxiproxy.startswith("v2.")
    assert versions.hey == "v0.1.4"
    assert set(versions.as_dict()) == {
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "etcd",
        "kwok",
        "jobset",
        "toxiproxy",
    }
    assert versions.kueue.startswith("v0.19.")


def test_the_cache_directory_follows_every_pin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    module = tmp_path / "module"
    module.mkdir()
    (module / "go.mod").write_text((GO_MODULE_DIR / "go.mod").read_text())
    (module / "go.sum").write_text("a\n")
    (module / "kueue").mkdir()
    (module / "kueue" / "go.mod").write_text((GO_MODULE_DIR / "kueue" / "go.mod").read_text())
    first = current_layout(module)
    (module / "go.sum").write_text("b\n")
    second = current_layout(module)
    (module / "kueue" / "go.sum").write_text("c\n")
    third = current_layout(module)
    assert first.root.parent == second.root.parent == third.root.parent == tmp_path / "cache"
    assert first.root.name.startswith(pinned_versions().kubernetes)
    assert len({first.root, second.root, third.root}) == 3


def test_kueue_is_pinned_in_its_own_module(tmp_path: Path) -> None:
    """Kueue's requirements never enter the control plane's module (they would move kube-apiserver's)."""
    assert "sigs.k8s.io/kueue" not in module_requirements(GO_MODULE_DIR / "go.mod")
    assert module_requirements(GO_MODULE_DIR / "kueue" / "go.mod")["sigs.k8s.io/kueue"].startswith("v0.19.")
    (tmp_path / "go.mod").write_text((GO_MODULE_DIR / "go.mod").read_text())
    with pytest.raises(PinError, match="pins Kueue is missing"):
        pinned_versions(tmp_path)


def test_binaries_not_built_name_the_make_target(tmp_path: Path) -> None:
    with pytest.raises(MissingBinaries, match=r"run `make kube` first"):
        require_built(BuildLayout(tmp_path / "nothing"))


def test_devstack_without_the_binaries_says_which_target_builds_them(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "devstack", "demo", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", CACHE_ENV: str(tmp_path / "empty-cache")},
        check=False,
    )
    assert result.returncode == 2
    assert "make kube" in result.stderr
    assert "Traceback" not in result.stderr


def test_no_go_on_path_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(build.BuildError) as missing:
        build.check_go()
    assert str(missing.value) == build.go_missing_message()
    assert "no `go` command on PATH" in str(missing.value)


@pytest.mark.parametrize(
    ("stderr", "expected"),
    [
        (
            "go: k8s.io/kubernetes@v1.36.9: reading "
            "https://proxy.golang.org/k8s.io/kubernetes/@v/v1.36.9.info: 404 Not Found\n",
            "make kube: the Go module proxy refused k8s.io/kubernetes@v1.36.9",
        ),
        (
            "go: downloading x\nverifying sigs.k8s.io/kwok@v0.8.0: 403 Forbidden\n",
            "make kube: the Go module proxy refused sigs.k8s.io/kwok@v0.8.0",
        ),
        ("something else broke\nthe last line\n", "make kube: `go build -trimpath` failed: the last line"),
    ],
)
def test_a_go_failure_is_one_line_naming_what_is_missing(stderr: str, expected: str) -> None:
    message = build.explain_go_failure(["build", "-trimpath", "x"], stderr)
    assert message.startswith(expected)
    assert "\n" not in message


KUBERNETES_GO_MOD = """module k8s.io/kubernetes

require (
\tgithub.com/x/y v1.0.0
\tk8s.io/api v0.0.0
\tk8s.io/streaming v0.0.0 // indirect
\tk8s.io/utils v0.0.0-20260210185600-b8788abfbbc2
)
"""


def test_staging_modules_are_the_ones_required_at_v0_0_0() -> None:
    assert staging_modules(KUBERNETES_GO_MOD) == ["k8s.io/api", "k8s.io/streaming"]
    assert staging_version("v1.36.3") == "v0.36.3"
    with pytest.raises(ValueError, match="unexpected"):
        staging_version("v2.0.0")


def test_the_replace_block_is_rewritten_in_place() -> None:
    block = replace_block(["k8s.io/api", "k8s.io/streaming"], "v0.36.4")
    rewritten = rewrite_replaces(GO_MOD, block)
    assert "k8s.io/streaming => k8s.io/streaming v0.36.4" in rewritten
    assert "k8s.io/api => k8s.io/api v0.36.3" not in rewritten
    assert rewritten.count("replace (") == 1
    assert rewrite_replaces("module m\n", block).endswith(block)


def test_the_repositorys_replace_block_covers_every_staging_module_at_the_pinned_release() -> None:
    go_mod = (GO_MODULE_DIR / "go.mod").read_text()
    version = staging_version(pinned_versions().kubernetes)
    replaced = {line.split()[0] for line in go_mod.splitlines() if "=>" in line}
    assert {"k8s.io/cri-streaming", "k8s.io/streaming", "k8s.io/api", "k8s.io/client-go"} <= replaced
    assert all(f"=> {module} {version}" in go_mod for module in replaced)


def test_extra_args_put_every_components_first_flag_before_any_second() -> None:
    flags = ["kcm=a=1", "kcm=b=2", "sched=a=1", "sched=b=2", "kcm=c=3"]
    assert kwokctl_extra_args(flags) == ["kcm=a=1", "sched=a=1", "kcm=b=2", "sched=b=2", "kcm=c=3"]


def test_node_heartbeat_refuses_a_grace_period_under_two_lease_renewals() -> None:
    assert NodeHeartbeat().kwokctl_options() == {
        "nodeLeaseDurationSeconds": 40,
        "kubeControllerManagerNodeMonitorPeriodMilliseconds": 5000,
        "kubeControllerManagerNodeMonitorGracePeriodMilliseconds": 40000,
    }
    with pytest.raises(ValueError, match="under two Lease renewals"):
        NodeHeartbeat(lease_seconds=600, monitor_grace_seconds=200)
