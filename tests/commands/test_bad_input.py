"""Bad input to every subcommand, as a table: each case runs `trainimg` in this process
(`main([...])`) and must end in one `trainimg ...: error: ...` message naming the offending
value, the documented exit code (2), no traceback, and nothing written: the files under the
test's places are the same before and after. The classes are issue 33's: engine URLs without a
scheme (--url, CONTAINER_HOST, DOCKER_HOST), a bad $TRAINIMG_ENGINE, -o/--provenance into a
place that cannot be written (/sys refuses even root; a file where a directory should be; a
directory; a device), --dest an existing file, a full filesystem (a 4 KiB tmpfs, when this
machine lets root mount one), a matrix or lock file that is missing, a directory or broken,
a bad date and an unknown cell; preflight's numbers, driver versions, inventories, records and
--html file, compat's driver, attestation keys, run's GPUs and timeouts, completion's shell."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from builder.cli import main
from tests.matrices import DATA

M = ["--matrix", str(DATA / "minimal.yaml")]
CELL = "debian12-cpu-py3.11-torch2.13.0-runtime"
NO_SCHEME = "has no scheme"
BAD_ENGINE = "$TRAINIMG_ENGINE=dokcer is not an engine"
SYS = "/sys/trainimg-out"  # /sys refuses new files, even root's (EACCES)


@dataclass(frozen=True)
class Case:
    argv: tuple[str, ...]
    says: tuple[str, ...]  # every one of these is in stderr ({tmp} and {full} filled in)
    env: dict[str, str] = field(default_factory=dict)
    code: int = 2
    full: bool = False  # needs the full filesystem


def case(*argv: str, says: str | tuple[str, ...], **kw: object) -> Case:
    return Case(tuple(argv), (says,) if isinstance(says, str) else says, **kw)  # type: ignore[arg-type]


ENGINE_COMMANDS = [
    ("build", CELL),
    ("base",),
    ("push", CELL, "--registry", "127.0.0.1:5/r"),
    ("prune",),
    ("sbom", CELL),
    ("export", CELL, "-o", "x.tar"),
    ("run", CELL),
    ("verify", CELL),
    ("diff", "a", "b"),
    ("arches", CELL),
    ("extend", CELL, "-r", "r.txt"),
    ("env",),
]
CASES: dict[str, Case] = {}
for cmd in ENGINE_COMMANDS:
    CASES[f"{cmd[0]}-url-no-scheme"] = case(
        *cmd, "--url", "127.0.0.1:1", says=("--url", "127.0.0.1:1", NO_SCHEME)
    )
    CASES[f"{cmd[0]}-bad-engine-env"] = case(
        *cmd, says=BAD_ENGINE, env={"TRAINIMG_ENGINE": "dokcer"}
    )
for cmd in [("env",), ("prune", *M), ("diff", "a", "b"), ("export", CELL, "-o", "{tmp}/x.tar")]:
    CASES[f"{cmd[0]}-container-host-no-scheme"] = case(
        *cmd, says=("CONTAINER_HOST=127.0.0.1:1", NO_SCHEME), env={"CONTAINER_HOST": "127.0.0.1:1"}
    )
for cmd in [("env", "--engine", "docker"), ("prune", *M, "--engine", "docker")]:
    CASES[f"{cmd[0]}-docker-host-no-scheme"] = case(
        *cmd, says=("DOCKER_HOST=localhost:2375", NO_SCHEME), env={"DOCKER_HOST": "localhost:2375"}
    )
CASES |= {
    "env-url-unknown-scheme": case("env", "--url", "htp://x", says="htp:// is not a scheme"),
    "env-url-empty-socket": case("env", "--url", "unix://", says="names no socket"),
    "run-url-unknown-scheme": case("run", CELL, "--url", "npipe:///x", says="npipe:// is not"),
    "env-engine-typo": case("env", "--engine", "dockr", says="invalid choice: 'dockr'"),
}
SLURM = ("slurm", CELL, *M, "--nodes", "1", "--gpus-per-node", "0")
for what, out, says in [
    ("unwritable", SYS + "/job.sh", ("-o /sys/trainimg-out/job.sh", "cannot write in /sys")),
    ("under-a-file", "{tmp}/file.txt/job.sh", ("{tmp}/file.txt is not a directory",)),
    ("a-directory", "{tmp}/dir", ("-o {tmp}/dir: is a directory",)),
    ("a-device", "/dev/full", ("-o /dev/full: exists and is not a regular file",)),
]:
    CASES[f"slurm-o-{what}"] = case(*SLURM, "-o", out, says=says)
    CASES[f"sbom-o-{what}"] = case("sbom", CELL, *M, "-o", out, says=says)
    CASES[f"sbom-provenance-{what}"] = case(
        "sbom",
        CELL,
        *M,
        "--provenance",
        out,
        says=tuple(s.replace("-o ", "--provenance ") for s in says),
    )
CASES |= {
    "export-o-unwritable": case(
        "export", CELL, "-o", "/sys/trainimg.tar", says="cannot write in /sys"
    ),
    "export-o-a-directory": case(
        "export", CELL, "-o", "{tmp}/dir.tar", says="-o {tmp}/dir.tar: is a directory"
    ),
    "export-o-bad-suffix": case("export", CELL, "-o", "{tmp}/x.zip", says="name it .tar"),
    "wheelhouse-dest-a-file": case(
        "wheelhouse", *M, "--dest", "{tmp}/file.txt", says="--dest {tmp}/file.txt: is a file"
    ),
    "wheelhouse-dest-unwritable": case(
        "wheelhouse", *M, "--dest", SYS, says="--dest /sys/trainimg-out: cannot write"
    ),
    "policy-dest-a-file": case(
        "policy",
        "--registry",
        "reg:5000/r",
        "--key",
        "{tmp}/key.asc",
        "--signatures",
        "{tmp}/sigs",
        "--dest",
        "{tmp}/file.txt",
        says="--dest {tmp}/file.txt: is a file",
    ),
    "policy-dest-unwritable": case(
        "policy",
        "--registry",
        "reg:5000/r",
        "--key",
        "{tmp}/key.asc",
        "--signatures",
        "{tmp}/sigs",
        "--dest",
        SYS,
        says="--dest /sys/trainimg-out: cannot write",
    ),
    "policy-key-not-a-key": case(
        "policy",
        "--registry",
        "reg:5000/r",
        "--key",
        "{tmp}/file.txt",
        "--signatures",
        "{tmp}/s",
        says="--key {tmp}/file.txt",
    ),
    "slurm-o-full-disk": case(
        *SLURM, "-o", "{full}/job.sh", full=True, says=("{full}", "filesystem is full")
    ),
    "slurm-o-full-disk-while-writing-room": case(
        *SLURM[:-4],
        *SLURM[-4:],
        "--archive",
        "/nfs/img.tar",
        "-o",
        "{full}/job.sh",
        "--",
        "--set",
        "a.b=" + "x" * 6000,
        full=True,
        says=("{full}/job.sh: no space left on device; the filesystem is full",),
    ),
    "wheelhouse-dest-full-disk": case(
        "wheelhouse", *M, "--offline", "--dest", "{full}/wh", full=True, says="filesystem is full"
    ),
    "sbom-o-full-disk-checked-first": case(
        "sbom", CELL, *M, "-o", "{full}/new-dir/x.json", full=True, says="cannot write in {full}"
    ),
}
for cmd in [
    ("matrix", "list"),
    ("matrix", "check"),
    ("render",),
    ("build",),
    ("wheelhouse",),
    ("push", "--registry", "127.0.0.1:5/r"),
    ("prune",),
    ("sbom", CELL),
    ("pin",),
    ("base",),
    ("compat", CELL, "--driver", "570.124.06"),
    (*SLURM[:2], *SLURM[4:]),
]:
    name = "-".join(cmd[:2]) if cmd[0] == "matrix" else cmd[0]
    CASES[f"{name}-matrix-missing"] = case(
        *cmd, "--matrix", "{tmp}/nope.yaml", says="{tmp}/nope.yaml"
    )
for cmd in [("matrix", "list"), ("build",), ("render",)]:
    name = "-".join(cmd[:2]) if cmd[0] == "matrix" else cmd[0]
    CASES[f"{name}-matrix-a-directory"] = case(*cmd, "--matrix", "{tmp}/dir", says="{tmp}/dir")
    CASES[f"{name}-matrix-not-yaml"] = case(
        *cmd, "--matrix", "{tmp}/broken.yaml", says="{tmp}/broken.yaml"
    )
for cmd in [
    ("prune",),
    ("push", CELL, "--registry", "127.0.0.1:5/r"),
    ("sbom", CELL),
    (*SLURM[:2], *SLURM[4:]),
]:
    CASES[f"{cmd[0]}-lock-broken"] = case(
        *cmd, *M, "--lock", "{tmp}/file.txt", says="{tmp}/file.txt"
    )
    CASES[f"{cmd[0]}-lock-a-directory"] = case(*cmd, *M, "--lock", "{tmp}/dir", says="{tmp}/dir")
for cmd in [
    ("matrix", "list"),
    ("build",),
    ("wheelhouse",),
    ("compat", CELL, "--driver", "570.124.06"),
]:
    name = "-".join(cmd[:2]) if cmd[0] == "matrix" else cmd[0]
    CASES[f"{name}-bad-today"] = case(*cmd, *M, "--today", "2026-13-01", says="2026-13-01")
for cmd in [
    ("build",),
    ("wheelhouse",),
    ("push", "--registry", "127.0.0.1:5/r"),
    ("matrix", "explain"),
    ("compat", "--driver", "570.124.06"),
    ("sbom",),
    ("export", "-o", "x.tar"),
    ("verify",),
    ("run",),
    ("arches",),
    ("diff", "localhost/x:1"),
]:
    name = "-".join(cmd[:2]) if cmd[0] == "matrix" else cmd[0]
    CASES[f"{name}-unknown-cell"] = case(
        *cmd,
        "debian12-cpu-py3.11-torch2.13.0-runtim",
        *M,
        says="debian12-cpu-py3.11-torch2.13.0-runtim",
    )


# --json FILE (builder/commands/json_out.py) on every command that prints JSON: checked before
# any work; and a --json that took compat's positional as its FILE is refused, not written to
JSON_COMMANDS = [
    ("matrix", "list", *M),
    ("matrix", "explain", CELL, *M),
    ("matrix", "check", *M),
    ("compat", CELL, *M, "--driver", "570.124.06"),
    ("arches", "{tmp}"),
    ("verify", CELL),
    ("preflight", "--from", "{tmp}"),
]
for cmd in JSON_COMMANDS:
    name = "-".join(cmd[:2]) if cmd[0] == "matrix" else cmd[0]
    for what, out, says in [
        ("unwritable", SYS + "/r.json", ("--json /sys/trainimg-out/r.json", "cannot write")),
        ("a-directory", "{tmp}/dir", ("--json {tmp}/dir: is a directory",)),
    ]:
        CASES[f"{name}-json-{what}"] = case(*cmd, "--json", out, says=says)
CASES["matrix-list-json-full-disk"] = case(
    "matrix", "list", *M, "--json={full}/r.json", full=True, says=("{full}", "filesystem is full")
)
CASES["compat-json-took-the-cell"] = case(
    "compat", "--json", CELL, *M, "--driver", "570.124.06",
    says=(f"--json took {CELL} as its FILE", "put IMAGE|CELL before --json, or write --json="),
)  # fmt: skip


# preflight: its numbers, versions, files and outputs; one value each, named in the message
PF = ("preflight", "--from", "{tmp}")
INV = ("preflight", "--inventory", "{tmp}/inv.ini")
for what, args, message in [
    ("html-no-directory", ("--html", "{tmp}/no/r.html"), "--html {tmp}/no/r.html: no directory"),
    ("html-a-directory", ("--html", "{tmp}/dir"), "--html {tmp}/dir: is a directory"),
    ("timeout-not-a-number", ("--timeout", "abc"), "--timeout: not a timeout: 'abc'"),
    ("timeout-negative", ("--timeout", "-3"), "--timeout: not a timeout: '-3'"),
    ("host-timeout-zero", ("--host-timeout", "0"), "--host-timeout: not a number from 1"),
    ("connect-timeout-zero", ("--connect-timeout", "0"), "--connect-timeout: not a number"),
    ("alive-count-negative", ("--server-alive-count-max", "-1"), "'-1'"),
    ("alive-interval-word", ("--server-alive-interval", "abc"), "'abc'"),
    ("target-driver-bad", ("--target-driver", "580.x"), "not a driver version: '580.x'"),
    ("target-module-typo", ("--target-module", "weird"), "invalid choice: 'weird'"),
    ("jobs-zero", ("--jobs", "0"), "not a job count: '0'"),
    ("bad-today", ("--today", "2026-02-30"), "not a date '2026-02-30'"),
    ("from-with-record", ("--record", "{tmp}/rec"), "--from judges recorded hosts"),
]:
    CASES[f"preflight-{what}"] = case(*PF, *args, says=message)
CASES |= {
    "preflight-from-missing": case(
        "preflight", "--from", "{tmp}/nope", says="{tmp}/nope: no such record directory"
    ),
    "preflight-inventory-missing": case(
        *INV[:2], "{tmp}/nope.ini", says="{tmp}/nope.ini: cannot read the inventory"
    ),
    "preflight-inventory-broken": case(*INV[:2], "{tmp}/file.txt", says="{tmp}/file.txt:1"),
    "preflight-ssh-config-missing": case(
        *INV, "--ssh-config", "{tmp}/nope.conf", says="--ssh-config {tmp}/nope.conf: no such"
    ),
    "preflight-limit-matches-nothing": case(
        *INV, "--limit", "node[a:zz]", says="--limit 'node[a:zz]': 'node[a:zz]' matches no"
    ),
    "compat-driver-not-a-version": case(
        "compat", CELL, *M, "--driver", "abc", says="not a driver version: 'abc'"
    ),
    "compat-driver-branch-only": case(
        "compat", CELL, *M, "--driver", "570", says="not a driver version: '570'"
    ),
    "attestations-key-missing": case(
        "attestations",
        "localhost/x:1",
        "--key",
        "{tmp}/nope.pub",
        says="{tmp}/nope.pub: not a PEM public key",
    ),
    "attestations-key-not-pem": case(
        "attestations",
        "localhost/x:1",
        "--key",
        "{tmp}/file.txt",
        says="{tmp}/file.txt: not a PEM public key",
    ),
    "push-attest-key-without-sign": case(
        "push",
        CELL,
        *M,
        "--registry",
        "127.0.0.1:5/r",
        "--attest-key",
        "{tmp}/k",
        says="--attest-key is used only with --sign",
    ),
    "run-gpus-nonsense": case("run", CELL, *M, "--gpus", "nonsense", says="--gpus 'nonsense'"),
    "run-shm-size-a-word": case(
        "run", CELL, *M, "--shm-size", "lots", says="--shm-size: not a size: 'lots'"
    ),
    "run-stop-timeout-negative": case(
        "run", CELL, *M, "--stop-timeout", "-1", says="--stop-timeout -1: expected seconds"
    ),
    "completion-unknown-shell": case("completion", "tcsh", says="tcsh: name one shell"),
    "facts-refresh-bad-today": case(
        "facts", "refresh", "--today", "2026-13-40", says="not a date '2026-13-40'"
    ),
}


@pytest.fixture(scope="module")
def full_fs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path | None]:
    """An 8 KiB tmpfs: `full/` of it filled to the last byte by `filler`, except that removing
    `room` leaves one 4 KiB page free (the check passes, the write does not fit). None where
    root may not mount one (a container)."""
    where = tmp_path_factory.mktemp("full")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8k,nr_inodes=64", "tmpfs", str(where)],
        capture_output=True,
        timeout=10,
    )
    if mounted.returncode != 0:
        yield None
        return
    try:
        (where / "room").write_bytes(b"x" * 4096)
        with (where / "filler").open("wb") as fh:
            try:
                fh.write(b"x" * 65536)
                fh.flush()
            except OSError:
                pass
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=10)


def _tree(*roots: Path) -> dict[str, int]:
    return {str(p): p.stat().st_size for r in roots for p in r.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input(
    name: str,
    full_fs: Path | None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = CASES[name]
    if c.full and full_fs is None:
        pytest.skip("root may not mount a tmpfs here: no full filesystem to write to")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir.tar").mkdir()
    (tmp_path / "file.txt").write_text("{not a lock\n")
    (tmp_path / "broken.yaml").write_text("project: [unclosed\n")
    (tmp_path / "key.asc").write_text("-----BEGIN PGP PUBLIC KEY BLOCK-----\n")
    (tmp_path / "inv.ini").write_text("[gpu]\nnode1\n")
    for var in ("CONTAINER_HOST", "DOCKER_HOST", "TRAINIMG_ENGINE"):
        monkeypatch.delenv(var, raising=False)
    for key, value in c.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    fill = {"tmp": str(tmp_path), "full": str(full_fs)}
    argv = [a.format(**fill) for a in c.argv]
    roots = [tmp_path, *([full_fs] if full_fs else [])]
    if c.full and "room" in name:
        (full_fs / "room").unlink()  # type: ignore[operator]
    before = _tree(*roots)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors: usage and one line, exit 2
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert code == c.code, err
    assert "Traceback" not in err and "Traceback" not in out
    assert "error:" in err and len(err.strip().splitlines()[-1]) < 600
    for text in c.says:
        assert text.format(**fill) in err
    assert _tree(*roots) == before  # nothing half-written, no temporary left
    if c.full and "room" in name:
        (full_fs / "room").write_bytes(b"x" * 4096)  # type: ignore[operator]
    assert Path("/dev/full").is_char_device() and not os.path.exists(SYS)


def test_what_escapes_a_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An engine SDK's or requests' error is one line, exit 2; a bug keeps its traceback."""
    import requests

    from builder.commands import env_cmd

    def refused(_args: object) -> int:
        raise requests.exceptions.ConnectionError("[Errno 111] Connection refused")

    monkeypatch.setattr(env_cmd, "run", refused)
    assert main(["env"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trainimg: error: ConnectionError: [Errno 111] Connection refused")

    def bug(_args: object) -> int:
        raise ZeroDivisionError("ours")

    monkeypatch.setattr(env_cmd, "run", bug)
    with pytest.raises(ZeroDivisionError):
        main(["env"])
