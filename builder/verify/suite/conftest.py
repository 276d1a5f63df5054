"""Fixtures of the in-container suite: the context verify wrote, the testinfra host, and the
facts gathered once per run (one exec for the OS/Python/torch probe, one for `trainer info`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import testinfra

PROBE = r"""
import json, os, platform, pwd, sys
out = {"python": platform.python_version(), "executable": sys.executable, "uid": os.getuid(),
       "env": dict(os.environ), "os_release": {}}
try:
    out["user"] = pwd.getpwuid(os.getuid()).pw_name
except KeyError:
    out["user"] = None
try:
    with open("/etc/os-release") as f:
        for line in f:
            k, sep, v = line.strip().partition("=")
            if sep:
                out["os_release"][k] = v.strip('"')
except OSError as exc:
    out["os_release_error"] = str(exc)
try:
    import torch
    out["torch"] = torch.__version__
    out["torch_cuda"] = torch.version.cuda
    out["torch_file"] = torch.__file__
    out["has_arch_flags"] = hasattr(torch._C, "_cuda_getArchFlags")
    out["arch_flags"] = torch._C._cuda_getArchFlags() if out["has_arch_flags"] else None
except Exception as exc:
    out["torch_error"] = repr(exc)
print(json.dumps(out))
"""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--trainimg-context",
        metavar="FILE",
        help="the JSON context `trainimg verify` writes (container, image, expectations)",
    )


@pytest.fixture(scope="session")
def ctx(request: pytest.FixtureRequest) -> dict[str, Any]:
    path = request.config.getoption("--trainimg-context")
    if not path:
        pytest.fail("no --trainimg-context: run the suite through `trainimg verify IMAGE`", False)
    data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="session")
def host(ctx: dict[str, Any]) -> Any:
    return testinfra.get_host(ctx["host"])


@pytest.fixture(scope="session")
def expect(ctx: dict[str, Any]) -> dict[str, Any]:
    return dict(ctx["expect"])


@pytest.fixture(scope="session")
def python(ctx: dict[str, Any]) -> str:
    """The interpreter the image's ENTRYPOINT runs (the trainer's), else python3."""
    entry = ctx["image"].get("entrypoint") or []
    return str(entry[0]) if entry and "python" in str(entry[0]) else "python3"


def run_json(host: Any, command: str, *args: str) -> dict[str, Any]:
    result = host.run(command, *args)
    if result.rc != 0:
        err = result.stderr.strip()
        last = err.splitlines()[-1] if err else "(no output on stderr)"
        pytest.fail(
            f"`{command.split()[0]} ...` failed in the container (exit {result.rc}): {last}\n"
            f"{err[-600:]}",
            False,
        )
    text = result.stdout.strip()
    try:
        data: dict[str, Any] = json.loads(text)  # one (possibly indented) JSON document
        return data
    except ValueError:
        pass
    lines = [ln for ln in text.splitlines() if ln.startswith("{")]  # or JSON after log lines
    try:
        data = json.loads(lines[-1])
    except (IndexError, ValueError):
        pytest.fail(f"no JSON from `{command.split()[0]} ...`: {text[-400:]!r}", False)
    return data


@pytest.fixture(scope="session")
def facts(host: Any, python: str) -> dict[str, Any]:
    return run_json(host, f"{python} -c %s", PROBE)


@pytest.fixture(scope="session")
def trainer_info(host: Any, python: str) -> dict[str, Any]:
    return run_json(host, f"{python} -m trainer info --json")


@pytest.fixture
def detail(record_property: Callable[[str, object], None]) -> Callable[[str], None]:
    """Say something about a passing check (it shows in the summary, JSON and JUnit XML)."""

    def say(text: str) -> None:
        record_property("detail", text)

    return say
