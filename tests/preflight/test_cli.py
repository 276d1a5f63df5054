"""`trainimg preflight` end to end on this machine (no GPU, no driver), and its bad inputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from builder.cli import main
from builder.facts import host as host_rules
from builder.host import parsers
from builder.preflight.checks import CHECK_IDS
from tests.preflight.conftest import PREFLIGHT_MATRIX, REPO


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["preflight", "--matrix", str(PREFLIGHT_MATRIX), *args])
    out, err = capsys.readouterr()
    return code, out, err


def _this_os_family() -> str | None:
    """This machine's family, read the way preflight must: from /etc/os-release alone."""
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return None
    osr = parsers.os_release(text)
    return host_rules.os_family(osr.id, osr.id_like) if osr else None


@pytest.mark.integration
def test_this_machine_reports_honestly() -> None:
    # (the time it takes is benchmarks/preflight_bench.py's: no timed tests)
    proc = subprocess.run(
        [sys.executable, "-m", "builder.cli", "preflight", "--verbose"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr
    if Path("/proc/driver/nvidia/version").exists():
        pytest.skip("this machine has an NVIDIA driver: the no-GPU expectations do not apply")
    assert proc.returncode in (1, 3), proc.stdout + proc.stderr
    assert "no NVIDIA driver is loaded" in proc.stdout
    assert f"exit {proc.returncode}" in proc.stdout.splitlines()[-1]


def test_json_report(capsys: pytest.CaptureFixture[str]) -> None:
    """Expectations follow this machine's os-release: on a non-EL host (Debian, with or without
    Debian's `rpm` and `dnf` installed) no RPM check applies and nothing blocks."""
    if Path("/proc/driver/nvidia/version").exists():
        pytest.skip("this machine has an NVIDIA driver: the no-GPU expectations do not apply")
    family = _this_os_family()
    code, out, _ = run_cli(capsys, "--json", "--target-driver", "570.124.06")
    doc = json.loads(out)
    assert doc["schema"] == 3 and doc["target_driver"] == "570.124.06"
    assert doc["hosts"][0]["verdicts"]["plan"] == doc["hosts"][0]["verdict"]
    assert doc["exit_code"] == code
    (local,) = doc["hosts"]
    assert local["host"] == "local" and local["reachable"]
    assert [c["id"] for c in local["checks"]] == list(CHECK_IDS)
    checks = {c["id"]: c for c in local["checks"]}
    if family != "el":
        assert code == 3, [
            (c["id"], c["finding"]) for c in local["checks"] if c["severity"] == "block"
        ]
        assert checks["kernel.devel"]["severity"] == "skip"
        assert "not an EL host" in checks["kernel.devel"]["finding"]
        assert "rpm" not in local["facts"]["probes"]  # never asked on a non-EL host
        assert not any("dnf " in c["remediation"] for c in local["checks"])
    assert local["facts"]["gpus"] == "no GPU"
    cu128 = [i for i in local["images"] if i["cuda"]]
    assert cu128 and all(i["after"]["status"] == "ok" for i in cu128)  # judged without a GPU
    assert all(i["now"]["status"] == "no-driver" for i in cu128)
    assert any("no GPU visible" in r for r in cu128[0]["after"]["reasons"])


def test_a_bad_host_never_stops_the_fleet(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys, "--hosts", "local://,ssh://nobody@127.0.0.1:1,bogus://x", "--jobs", "3",
        "--no-images", "--json",
    )  # fmt: skip
    doc = json.loads(out)
    assert code == doc["exit_code"] == 4  # unreachable hosts: broken now
    hosts = {h["host"]: h for h in doc["hosts"]}
    assert hosts["local://"]["reachable"]
    for bad in ("ssh://nobody@127.0.0.1:1", "bogus://x"):
        assert not hosts[bad]["reachable"]
        (reach,) = hosts[bad]["checks"]
        assert reach["id"] == "host.reach" and reach["severity"] == "block"
    refused = hosts["ssh://nobody@127.0.0.1:1"]["checks"][0]["finding"]
    assert "Connection refused" in refused and "CommandResult" not in refused  # words, no repr
    assert "not a host spec" in hosts["bogus://x"]["checks"][0]["finding"]


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("ssh://-oProxyCommand=touch${IFS}/tmp/h21-pwned", "is not a hostname or an IP address"),
        ("ssh://root@gpu1?ssh_config=/tmp/h21-evil.conf", "option 'ssh_config' is not one"),
        ("ssh://-oProxyCommand=x@gpu1", "is not a user name"),
        ("ssh://gpu1:22x", "is not a port number"),
        ("podman://a;b", "is not a container name"),
    ],
)
def test_hosts_values_are_validated_like_inventory_hosts(
    capsys: pytest.CaptureFixture[str], spec: str, says: str
) -> None:
    """A --hosts value never reaches ssh as an option: it is parsed into validated fields
    (as an inventory host is), and a value of the wrong shape makes that host unusable."""
    code, out, _ = run_cli(capsys, "--hosts", spec, "--no-images", "--json")
    (host,) = json.loads(out)["hosts"]
    assert code == 4 and not host["reachable"]
    assert says in host["checks"][0]["finding"]
    assert not Path("/tmp/h21-pwned").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--target-driver", "five-seventy"), "not a driver version: 'five-seventy'"),
        (("--target-driver", "570.124.06.1.2"), "not a driver version"),
        (("--jobs", "0"), "not a job count"),
        (("--target-module", "closed"), "invalid choice: 'closed'"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    with pytest.raises(SystemExit) as exc:
        run_cli(capsys, *args)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_an_inventory_that_does_not_parse(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "hosts.ini"
    bad.write_text("[gpus\nh1\n")
    code, out, err = run_cli(capsys, "--inventory", str(bad))
    assert code == 2 and out == ""
    assert f"{bad}:1: not a section header" in err and "Traceback" not in err
    code, _, err = run_cli(capsys, "--limit", "gpus")
    assert code == 2 and "--limit needs --inventory" in err


def test_an_inventory_host_without_a_usable_connection(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    inv = tmp_path / "hosts.ini"
    inv.write_text("[w]\nwin1 ansible_connection=winrm\nme ansible_connection=local\n")
    code, out, _ = run_cli(capsys, "--inventory", str(inv), "--no-images", "--json")
    hosts = {h["host"]: h for h in json.loads(out)["hosts"]}
    assert code == 4 and hosts["me"]["reachable"]
    assert "ansible_connection=winrm" in hosts["win1"]["checks"][0]["finding"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--lock", "{tmp}/lock.json"), "--lock {tmp}/lock.json: no such file"),
        (("--hosts", ""), "--hosts is empty"),
        (("--hosts", " , "), "--hosts is empty"),
    ],
)
def test_bad_input_is_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert message.replace("{tmp}", str(tmp_path)) in err and "Traceback" not in err


def test_a_missing_matrix_given_explicitly_is_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(["preflight", "--matrix", str(tmp_path / "nope.yaml")])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "no such file" in err


@pytest.mark.parametrize("bad", ["10", "0570.124.06", "570.124.06.1", "570", "570.124.06 "])
def test_target_driver_takes_nvidia_versions_only(
    capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    with pytest.raises(SystemExit) as exc:
        run_cli(capsys, "--target-driver", bad)
    assert exc.value.code == 2 and "not a driver version" in capsys.readouterr().err


def test_inventory_vars_that_are_not_a_mapping_name_the_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  children:\n    gpu:\n      hosts:\n        h1:\n      vars: [1, 2]\n")
    code, out, err = run_cli(capsys, "--inventory", str(inv))
    assert code == 2 and out == ""
    assert "all.children.gpu.vars must be a mapping" in err and "[1, 2]" in err


def test_a_container_that_does_not_exist_is_unreachable(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys, "--hosts", "docker://trainimg-no-such-container-7f3a", "--no-images", "--json"
    )
    (host,) = json.loads(out)["hosts"]
    assert code == 4 and not host["reachable"]
    assert (
        host["checks"][0]["id"] == "host.reach" and "failed (exit" in host["checks"][0]["finding"]
    )


def test_a_surprise_on_one_host_is_that_hosts_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    from builder.preflight.fleet import run_fleet
    from builder.preflight.hostio import ReadOnlyHost
    from builder.preflight.inventory import Target
    from tests.preflight.conftest import context
    from tests.preflight.fakehost import FakeHost, Fixture

    def connect(spec: str) -> ReadOnlyHost:
        if spec == "boom":
            raise ValueError("a parser met something new")
        return ReadOnlyHost(FakeHost(Fixture.load_fixture("el9-h100")), spec)

    monkeypatch.delenv("TRAINIMG_DEBUG", raising=False)
    targets = [Target("a", "boom"), Target("b", "fine")]
    reports = run_fleet(targets, context([]), jobs=2, connect_fn=connect)
    assert [r.host for r in reports] == ["a", "b"]
    assert not reports[0].reachable and "ValueError: a parser met something new" in (
        reports[0].checks[0].message
    )
    assert reports[1].reachable and len(reports[1].checks) > 10
    monkeypatch.setenv("TRAINIMG_DEBUG", "1")
    with pytest.raises(ValueError):
        run_fleet(targets[:1], context([]), jobs=1, connect_fn=connect)
