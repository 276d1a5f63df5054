"""`trainimg extend` against hostile wheels made in the test, on the CPU cell (the session's
image): a wheel with a new name that rewrites torch's `nn/modules/linear.py` (still importable:
the original with a line added), one that installs a `.pth`, one whose console script is
torch's `torchrun`, and one that cannot import (as PyPI's torchvision 0.28.0 in a CPU cell).
One child is built with all four; the proof fails it (exit 1), naming every path and the
import, and the child is discarded and recorded nowhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.build import lock as lockfile
from builder.engines.base import RunSpec
from builder.engines.podman import PodmanEngine
from builder.spec.layout import VENV_PYTHON
from tests.extend.wheels_made import make_wheel
from tests.helpers import CPU_CELL, RunCli

pytestmark = pytest.mark.integration  # runs trainimg as a CLI on the session's image

LINEAR = "torch/nn/modules/linear.py"


def _parent_file(podman_service: str, image: str, member: str) -> tuple[str, bytes]:
    """(site-packages, the bytes of site-packages/member) in the parent image."""
    probe = (
        "import sys, sysconfig; p = sysconfig.get_paths()['purelib']; "
        f"sys.stdout.write(p + '\\n' + open(p + '/{member}').read())"
    )
    engine = PodmanEngine(podman_service)
    try:
        out = engine.run(RunSpec(image, entrypoint=[VENV_PYTHON], command=["-c", probe]))
    finally:
        engine.close()
    assert out.exit_code == 0, out.stderr
    site, _, text = out.stdout.partition("\n")
    return site, text.encode()


def test_hostile_wheels_fail_the_extend_naming_each_path(
    run_cli: RunCli,
    podman_service: str,
    cpu_image: str,
    wheelhouse: Path,
    repo: str,
    tmp_path: Path,
) -> None:
    lock = tmp_path / "lock.json"
    r = run_cli(
        "build", "--url", podman_service, "--wheelhouse", str(wheelhouse), "--lock", str(lock)
    )
    assert r.code == 0, r.err
    parent = lockfile.read(lock)[CPU_CELL]
    site, linear = _parent_file(podman_service, parent.image_id, LINEAR)
    links = tmp_path / "hostile"
    make_wheel(links, "evil-overwrite", "1.0", {
        "evil_overwrite.py": b"",
        LINEAR: linear + b"\nimport os  # a line the parent never proved\n",
    })  # fmt: skip
    make_wheel(links, "evil-pth", "1.0", {"evil_pth.py": b"", "zz_evil.pth": b"import evil_pth\n"})
    make_wheel(
        links, "evil-script", "1.0", {"evil_script.py": b"def main():\n    return 0\n"},
        console_scripts={"torchrun": "evil_script:main"},
    )  # fmt: skip
    make_wheel(links, "needs-cuda", "1.0", {
        "needs_cuda/__init__.py": b"from needs_cuda import _C  # the libcudart.so.13 build\n",
    })  # fmt: skip
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("evil-overwrite==1.0\nevil-pth==1.0\nevil-script==1.0\nneeds-cuda==1.0\n")
    r = run_cli(
        "extend", CPU_CELL, "-r", str(reqs), "--name", "hostile-ext", "--offline",
        "--find-links", str(links), "--url", podman_service, "--wheelhouse", str(wheelhouse),
        "--extra-wheelhouse", str(tmp_path / "extra"), "--lock", str(lock),
        "--repository", repo, "--no-verify",
    )  # fmt: skip
    assert r.code == 1, r.out + r.err
    assert "Traceback" not in r.err
    assert "does not carry" in r.err and "(discarded, nothing recorded)" in r.err
    assert f"{site}/{LINEAR}: file overwritten (sha256" in r.err
    assert "/opt/venv/bin/torchrun: console script over an existing name overwritten" in r.err
    assert f"{site}/zz_evil.pth: a new .pth file" in r.err
    assert "needs-cuda==1.0: `import needs_cuda` fails in the child: ImportError" in r.err
    assert r.out == ""
    assert "hostile-ext" not in lockfile.read(lock)
    engine = PodmanEngine(podman_service)
    try:
        assert not engine.image_exists(f"{repo}:hostile-ext")
    finally:
        engine.close()
