"""Preflight through a real testinfra backend: containers that play the fixture hosts.

Each fixture host becomes a container of the offline base image (one image for the session,
no build) holding the host's files and one fake program per recorded command; testinfra's
podman:// backend runs preflight's probes in it with `podman exec`. The same checks must come
out as from the in-memory fake (which carries the other targets' verdicts, e.g. 565.57.01),
only commands on the allow-list may reach the backend, and the verdicts hold end to end
through the CLI, hosts checked in parallel.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builder.cli import main
from builder.engines.local_podman import LocalPodman
from builder.preflight import allowlist
from tests.preflight.conftest import PREFLIGHT_MATRIX, TODAY
from tests.preflight.fakehost import HOSTS, Fixture, container_path, materialize
from tests.preflight.test_allowlist import READ_ONLY_PROGRAMS

pytestmark = [pytest.mark.engine, pytest.mark.slow]

NO_DKMS = "el9-h100-no-dkms"  # el9-h100 with dkms uninstalled: a command missing on a host
# Fixtures derived from another one by changing content only (versions, one file) are judged
# in memory; a container each would add start-up time and prove nothing new about transport.
DERIVED = {
    "el9-l40s-r595-cuda13.2",
    "el9-l40s-r610-cuda13.3",  # the R610+ nvidia-smi format (issue 28)
    "el9-l40s-r615-cuda13.4",
    "el9-l40s-r620-cuda13.5",
    "el9-rtx4080-r550",  # a GPU not in the catalogue (judged by run and verify too)
    "el9-l40s-rtx5090-r565",
    "el9-l40s-cdi-args-scalar",
    "el9-h100-xid-pinned",
    # the fleet-gate hosts (judged in memory by test_gate.py)
    "el9-v100-r535",
    "el9-b200-unnamed-pci",
    "debian12-l40s-healthy",
    "el9-h100-cdi-shadowed",
    "el9-h100-secureboot-kmods",
}
CONTAINER_HOSTS = [h for h in HOSTS if h not in DERIVED]


def fixture_for(name: str) -> Fixture:
    if name == NO_DKMS:
        fx = Fixture.load_fixture("el9-h100")
        return dataclasses.replace(
            fx, name=NO_DKMS, recordings=[r for r in fx.recordings if r.argv[0] != "dkms"]
        )
    return Fixture.load_fixture(name)


@pytest.fixture(scope="module")
def containers(
    local_podman: LocalPodman, offline_base: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """fixture name -> running container name; every container is removed at the end."""
    started: dict[str, str] = {}
    try:
        for name in [*CONTAINER_HOSTS, NO_DKMS]:
            cname = f"trainimg-pf-{name}-{os.getpid()}"
            staging = tmp_path_factory.mktemp(name) / "fakehost"
            materialize(fixture_for(name), staging)
            started[name] = cname  # before `run`: a half-created container is removed too
            local_podman.podman(
                "run", "-d", "--name", cname, "--network", "none",
                "--env", f"PATH={container_path()}", offline_base, "sleep", "infinity",
            )  # fmt: skip
            local_podman.podman("cp", f"{staging}/.", f"{cname}:/opt/fakehost")
            local_podman.podman("exec", cname, "/bin/sh", "/opt/fakehost/setup.sh")
        yield started
    finally:
        for cname in started.values():
            local_podman.podman("rm", "-f", "-t", "0", cname, check=False)


@pytest.fixture(scope="module")
def audit() -> Iterator[list[str]]:
    """Every shell line testinfra runs locally (podman exec ... /bin/sh -c LINE)."""
    import testinfra.backend.base as base

    lines: list[str] = []
    original = base.BaseBackend.run_local

    def recording(self: Any, command: str, *args: str) -> Any:
        lines.append(self.quote(command, *args))
        return original(self, command, *args)

    base.BaseBackend.run_local = recording
    try:
        yield lines
    finally:
        base.BaseBackend.run_local = original


def cli_json(*args: str) -> tuple[int, dict[str, Any]]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["preflight", *args, "--today", TODAY.isoformat(), "--json"])
    return code, json.loads(buf.getvalue())


def inventory(path: Path, containers: dict[str, str], names: list[str]) -> Path:
    hosts = "".join(
        f"    {n}:\n      ansible_host: {containers[n]}\n"
        "      ansible_connection: containers.podman.podman\n"
        for n in names
    )
    path.write_text("all:\n  hosts:\n" + hosts + "    gone:\n      ansible_connection: podman\n")
    return path


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A matrix of our own (no images/lock.json beside it: the in-memory runs have none)."""
    d = tmp_path_factory.mktemp("matrix")
    shutil.copy(PREFLIGHT_MATRIX, d / "matrix.yaml")
    return d


@pytest.fixture(scope="module")
def fleet_570(
    containers: dict[str, str], audit: list[str], workdir: Path
) -> tuple[int, dict[str, dict[str, Any]]]:
    """One CLI run over every container host (and one that is gone), four at a time."""
    inv = inventory(workdir / "fleet.yml", containers, list(containers))
    code, doc = cli_json("--matrix", str(workdir / "matrix.yaml"), "--inventory", str(inv),
                         "--target-driver", "570.124.06", "--jobs", "4")  # fmt: skip
    assert doc["exit_code"] == code
    return code, {h["host"]: h for h in doc["hosts"]}


@pytest.mark.parametrize("name", CONTAINER_HOSTS)
def test_a_container_host_reports_what_the_recorded_host_does(
    name: str, fleet_570: tuple[int, dict[str, dict[str, Any]]], run_fixture: Any
) -> None:
    through_podman = fleet_570[1][name]
    in_memory = run_fixture(name, "570.124.06")[0].as_json()
    assert through_podman["reachable"], through_podman["checks"][0]
    assert through_podman["checks"][0]["finding"].startswith("reached through podman://")
    assert through_podman["checks"][1:] == in_memory["checks"][1:]
    assert through_podman["images"] == in_memory["images"]
    assert through_podman["verdict"] == in_memory["verdict"]


def test_only_allow_listed_commands_reached_the_containers(
    fleet_570: tuple[int, dict[str, dict[str, Any]]], audit: list[str]
) -> None:
    execs = [shlex.split(line) for line in audit if line.startswith("podman exec ")]
    assert len(execs) > 100  # every host was really probed through the backend
    programs = set()
    for words in execs:
        assert words[:2] == ["podman", "exec"] and words[3:5] == ["/bin/sh", "-c"], words
        argv = allowlist.probe_argv(words[5])
        assert allowlist.permitted(argv), argv
        programs.add(argv[0])
    assert programs <= READ_ONLY_PROGRAMS
    assert {"nvidia-smi", "dkms", "mokutil", "rpm", "cat", "podman", "systemctl"} <= programs
    assert all(line.startswith("podman exec ") for line in audit), "testinfra ran something else"


def test_done_means_570_and_b200_through_containers(
    fleet_570: tuple[int, dict[str, dict[str, Any]]],
) -> None:
    code, hosts = fleet_570
    assert code == 4  # broken now (the gone host, B200 kept proprietary, ...): nothing breaks
    for name in ("el9-h100", "el9-geforce"):
        cu128 = [i for i in hosts[name]["images"] if i["cuda"]]
        assert cu128 and all(i["after"]["status"] == "ok" for i in cu128), name
    # the host's own podman images, read through the container: NVIDIA's CUDA 12.8.1 image
    local = {i["image"]: i for i in hosts["el9-h100"]["images"] if i["source"] == "local"}
    nvidia = local["docker.io/nvidia/cuda:12.8.1-base-rockylinux9"]
    assert (nvidia["now"]["status"], nvidia["after"]["status"]) == ("fwd-compat", "ok")
    b200 = {c["id"]: c["severity"] for c in hosts["el9-b200-proprietary"]["checks"]}
    assert b200["driver.module"] == "block" and hosts["el9-b200-proprietary"]["verdict"] == "block"


def test_a_missing_command_and_a_missing_host(
    fleet_570: tuple[int, dict[str, dict[str, Any]]],
) -> None:
    hosts = fleet_570[1]
    dkms = next(c for c in hosts[NO_DKMS]["checks"] if c["id"] == "dkms.nvidia")
    assert dkms["severity"] == "warn" and "`dkms` is not installed" in dkms["finding"]
    assert not hosts["gone"]["reachable"]
    assert "unreachable" in hosts["gone"]["checks"][0]["finding"]
