"""The pure parts of extend's supply-chain proof: the file-level comparison, the top-level
modules of a wheel, --copy into locked trees, --hash lines, markers and pip's environment."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

from builder.build import closure
from builder.build.wheelhouse import Locked
from builder.extend import containerfile, files, imports, requirements, wheels
from tests.extend.wheels_made import make_wheel
from tests.helpers import CPU_CELL, RunCli

SITE = "/opt/venv/lib/python3.12/site-packages"
PARENT = {
    f"{SITE}/torch/__init__.py": "a" * 64,
    f"{SITE}/torch/nn/modules/linear.py": "b" * 64,
    f"{SITE}/torch-2.13.0.dist-info/RECORD": "c" * 64,
    f"{SITE}/__pycache__/typing_extensions.cpython-312.pyc": "d" * 64,
    f"{SITE}/typing_extensions.py": "e" * 64,
    "/opt/venv/bin/torchrun": "f" * 64,
    "/opt/venv/bin/python": "link:/usr/bin/python3.12",
    "/opt/trainimg/trainer/__init__.py": "1" * 64,
}


def test_an_unchanged_child_with_a_new_package_is_clean() -> None:
    child = {
        **PARENT,
        f"{SITE}/einops/__init__.py": "2" * 64,
        f"{SITE}/einops-0.8.1.dist-info/RECORD": "3" * 64,
        f"{SITE}/__pycache__/six.cpython-312.pyc": "4" * 64,
        "/opt/venv/bin/einops-cli": "5" * 64,
    }
    assert files.compare_trees(PARENT, child, SITE) == []


def test_every_breach_names_its_path() -> None:
    child = dict(PARENT)
    child[f"{SITE}/torch/nn/modules/linear.py"] = "9" * 64
    child["/opt/venv/bin/torchrun"] = "8" * 64
    child["/opt/venv/bin/python"] = "link:/tmp/evil"
    del child[f"{SITE}/typing_extensions.py"]
    child[f"{SITE}/zz_hook.pth"] = "7" * 64
    child[f"{SITE}/torch/backdoor.py"] = "6" * 64
    child[f"{SITE}/torch-2.13.0.dist-info/entry_points.txt"] = "6" * 64
    child["/opt/trainimg/trainer/extra.py"] = "6" * 64
    child[f"{SITE}/typing_extensions/__init__.py"] = "6" * 64  # a package beats the module
    child[f"{SITE}/typing_extensions.cpython-312-x86_64-linux-gnu.so"] = "6" * 64
    child[f"{SITE}/__pycache__/typing_extensions.cpython-312.opt-1.pyc"] = "6" * 64
    got = {b.path: b.what for b in files.compare_trees(PARENT, child, SITE)}
    assert got[f"{SITE}/torch/nn/modules/linear.py"].startswith("file overwritten (sha256 bbbb")
    assert got["/opt/venv/bin/torchrun"].startswith("console script over an existing name")
    assert "link:/usr/bin/python3.12 -> link:/tmp/evil" in got["/opt/venv/bin/python"]
    assert got[f"{SITE}/typing_extensions.py"] == "removed (the parent has it)"
    assert got[f"{SITE}/zz_hook.pth"].startswith("a new .pth file")
    assert got[f"{SITE}/torch/backdoor.py"] == f"a new file under the locked directory {SITE}/torch"
    assert "torch-2.13.0.dist-info" in got[f"{SITE}/torch-2.13.0.dist-info/entry_points.txt"]
    assert got["/opt/trainimg/trainer/extra.py"] == "a new file in the trainer's tree"
    shadow = "shadows the locked module typing_extensions"
    assert got[f"{SITE}/typing_extensions/__init__.py"].startswith(shadow)
    assert got[f"{SITE}/typing_extensions.cpython-312-x86_64-linux-gnu.so"].startswith(shadow)
    assert got[f"{SITE}/__pycache__/typing_extensions.cpython-312.opt-1.pyc"].startswith(
        "new bytecode for a locked module"
    )
    assert len(got) == 11


def test_the_manifest_probe_lists_files_and_links(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_bytes(b"x = 1\n")
    (tmp_path / "link").symlink_to("pkg")
    source = files.manifest_probe((str(tmp_path),))
    out = subprocess.run([sys.executable, "-c", source], capture_output=True, timeout=60)
    got = json.loads(out.stdout)["files"]
    assert got == {
        f"{tmp_path}/pkg/a.py": hashlib.sha256(b"x = 1\n").hexdigest(),
        f"{tmp_path}/link": "link:pkg",
    }


def test_top_level_modules_come_from_the_record(tmp_path: Path) -> None:
    whl = make_wheel(
        tmp_path,
        "demo-pkg",
        "1.0",
        {
            "demo/__init__.py": b"",
            "demo/sub/x.py": b"",
            "helper.py": b"",
            "_native.cpython-312-x86_64-linux-gnu.so": b"",
            "demo_pkg-1.0.data/scripts/tool": b"",
            "zz.pth": b"import os\n",
        },
    )
    assert imports.top_level_modules(whl) == ["_native", "demo", "helper"]


@pytest.mark.parametrize(
    "dest", ["/opt/venv", "/opt/venv/lib/x", "/opt/trainimg/trainer/", "/opt", "/", "/opt/"]
)
def test_copy_into_or_above_a_locked_tree_is_refused(tmp_path: Path, dest: str) -> None:
    with pytest.raises(containerfile.CopySpecError, match="which the parent image locks"):
        containerfile.parse_copy(f"{tmp_path}:{dest}", 0)


def test_copy_beside_the_locked_trees_is_taken(tmp_path: Path) -> None:
    assert containerfile.parse_copy(f"{tmp_path}:/opt/venv2/app", 0).dest == "/opt/venv2/app"


PIP_COMPILE = """\
#
# This file is autogenerated by pip-compile with Python 3.12
#
einops==0.8.1 \\
    --hash=sha256:{a} \\
    --hash=sha256:{b}
    # via -r requirements.in
tomli==2.0.1 ; python_version < "3.11" \\
    --hash=sha256:{b}
    # via -r requirements.in
"""


def test_pip_compile_hashes_and_markers(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text(PIP_COMPILE.format(a="a" * 64, b="b" * 64))
    reqs = requirements.parse(path)
    assert [(r.line, r.text, sorted(r.hashes)) for r in reqs] == [
        (4, "einops==0.8.1", ["a" * 64, "b" * 64]),
        (8, 'tomli==2.0.1 ; python_version < "3.11"', ["b" * 64]),
    ]
    keep, dropped = requirements.applicable(reqs, closure.marker_environment("3.12"))
    assert [r.name for r in keep] == ["einops"] and [r.name for r in dropped] == ["tomli"]
    keep, dropped = requirements.applicable(reqs, closure.marker_environment("3.10"))
    assert len(keep) == 2 and not dropped


def test_a_hash_that_is_not_sha256_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text("einops==0.8.1 --hash=md5:abc\n")
    with pytest.raises(requirements.RequirementsError, match=r"requirements.txt:1: --hash 'md5"):
        requirements.parse(path)


def test_hash_checking_mode_refuses_an_unpinned_or_mismatched_wheel(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text(f"einops==0.8.1 --hash=sha256:{'a' * 64}\n")
    reqs = requirements.parse(path)

    def locked(file: str, name: str, version: str, sha: str) -> Locked:
        return Locked(tmp_path / file, canonicalize_name(name), Version(version), sha, "extra")

    ok = locked("einops-0.8.1-py3-none-any.whl", "einops", "0.8.1", "a" * 64)
    bad = locked("einops-0.8.1-py3-none-any.whl", "einops", "0.8.1", "c" * 64)
    dep = locked("six-1.0-py3-none-any.whl", "six", "1.0", "d" * 64)
    assert wheels.check_hashes(reqs, [ok]) == []
    assert "is none of the 1 --hash values given for einops" in wheels.check_hashes(reqs, [bad])[0]
    assert "six has no --hash line" in wheels.check_hashes(reqs, [ok, dep])[0]
    path.write_text("einops==0.8.1\n")
    assert wheels.check_hashes(requirements.parse(path), [bad, dep]) == []  # mode off


def test_pip_ignores_the_users_config_unless_asked() -> None:
    environ = {
        "HOME": "/home/u",
        "PIP_EXTRA_INDEX_URL": "https://evil.example/simple",
        "PIP_FIND_LINKS": "/tmp/anything",
        "PIP_CERT": "/etc/ssl/certs/ca-certificates.crt",
    }
    env = wheels.pip_env(environ, pip_config=False)
    assert env == {
        "HOME": "/home/u",
        "PIP_CERT": "/etc/ssl/certs/ca-certificates.crt",
        "PIP_CONFIG_FILE": "/dev/null",
    }
    assert wheels.pip_env(environ, pip_config=True) == environ


def test_a_copy_into_the_venv_is_refused_before_any_build(run_cli: RunCli, tmp_path: Path) -> None:
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("einops==0.8.1\n")
    app = tmp_path / "app"
    app.mkdir()
    r = run_cli(
        "extend", CPU_CELL, "-r", str(reqs), "--copy", f"{app}:/opt/venv/lib/evil",
        "--url", "unix:///nonexistent.sock",
    )  # fmt: skip
    assert r.code == 2, r.out + r.err
    assert "would write into /opt/venv, which the parent image locks" in r.err
    assert "Traceback" not in r.err
