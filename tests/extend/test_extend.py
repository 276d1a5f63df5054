"""`trainimg extend` end to end on the CPU cell (the session's image): a pip-compile hashed
requirement (a false-marker line dropped, the user's pip config ignored) and a copied directory
build into a child that keeps the parent's stack and files (the proof), imports, passes verify
and is recorded with its parent and the user's hash; a requirement that would replace torch is
refused, naming it, before anything is built."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.build import lock as lockfile
from builder.engines.base import RunSpec
from builder.engines.podman import PodmanEngine
from builder.spec.labels import PARENT_CELL_LABEL, PARENT_IMAGE_LABEL, TORCH_LABEL
from tests.conftest import CACHE
from tests.helpers import CPU_CELL, RunCli

pytestmark = pytest.mark.integration  # runs trainimg as a CLI, fetches a wheel from PyPI
BENIGN = "einops==0.8.1"  # pure Python, no dependencies
# its wheel's sha256 as PyPI serves it (pypi.org/project/einops/0.8.1/#files, 2026-12-02)
EINOPS_SHA256 = "919387eb55330f5757c6bea9165c5ff5cfe63a642682ea788a6d472576d81737"
# what `pip-compile --generate-hashes` writes, with a line whose marker is false for the cell
HASHED = f"""\
# what our team adds
{BENIGN} \\
    --hash=sha256:{EINOPS_SHA256}
    # via -r requirements.in
numpy  # locked: stays at its version
tomli==2.0.1 ; python_version < "3.11"
"""


def _parent_record(run_cli: RunCli, url: str, wheelhouse: Path, lock: Path) -> None:
    """The CPU cell's lock record: the session's image is up to date, so this only records."""
    r = run_cli("build", "--url", url, "--wheelhouse", str(wheelhouse), "--lock", str(lock))
    assert r.code == 0, r.err


def test_extend_builds_proves_and_verifies_a_child(
    run_cli: RunCli,
    podman_service: str,
    cpu_image: str,
    wheelhouse: Path,
    repo: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lock = tmp_path / "lock.json"
    _parent_record(run_cli, podman_service, wheelhouse, lock)
    reqs = tmp_path / "requirements.txt"
    reqs.write_text(HASHED)
    # the user's pip config names an index that does not answer: extend must not read it
    pip_conf = tmp_path / "pip.conf"
    pip_conf.write_text("[global]\nindex-url = http://127.0.0.1:9/simple\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(pip_conf))
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "http://127.0.0.1:9/simple")
    app = tmp_path / "app"
    app.mkdir()
    (app / "train_my_model.py").write_text("print('hello from the extension')\n")
    r = run_cli(
        "extend", CPU_CELL, "-r", str(reqs), "--copy", f"{app}:/workspace/app",
        "--name", "team-ext", "--url", podman_service, "--wheelhouse", str(wheelhouse),
        "--extra-wheelhouse", str(CACHE / "wheelhouse-extend"), "--lock", str(lock),
        "--repository", repo, "--steps", "4",
        # the parent's compiler check and fatbin scan cover the child (the same files: the
        # fingerprint proves it); CI time goes to what an extension can break
        "--only", "not train_compile and not sm_kernels_fatbin_scan",
    )  # fmt: skip
    assert r.code == 0, r.out + r.err
    assert "fingerprint: the same as" in r.err
    assert "of the locked trees unchanged; imports: einops==0.8.1 (einops)" in r.err
    assert "tomli==2.0.1" in r.err and "its marker is false for" in r.err
    assert "PASS  supply_chain" in r.err  # the child's labels, lock record and wheels agree
    child_ref, child_id = r.out.split()[:2]
    assert child_ref == f"{repo}:team-ext"
    records = lockfile.read(lock)
    child, parent = records["team-ext"], records[CPU_CELL]
    assert child.image_id == child_id
    assert child.parent == {"cell": CPU_CELL, "image_id": parent.image_id, "digest": parent.digest}
    assert child.wheels == {**parent.wheels, BENIGN: EINOPS_SHA256}  # the user's hash
    assert child.labels[PARENT_CELL_LABEL] == CPU_CELL
    assert child.labels[PARENT_IMAGE_LABEL] == parent.image_id
    assert child.labels[TORCH_LABEL] == parent.labels[TORCH_LABEL]
    engine = PodmanEngine(podman_service)
    try:
        probe = (
            "import einops, numpy, torch, json, os; print(json.dumps([einops.__version__, "
            "numpy.__version__, torch.__version__, os.stat('/workspace/app/train_my_model.py')"
            ".st_uid, os.getuid()]))"
        )
        out = engine.run(RunSpec(child_ref, entrypoint=["python"], command=["-c", probe]))
        assert out.exit_code == 0, out.stderr
        einops_v, numpy_v, torch_v, owner, uid = json.loads(out.stdout)
        assert einops_v == BENIGN.split("==")[1]
        assert f"numpy=={numpy_v}" in parent.wheels  # the lock's numpy, not a newer one
        assert torch_v == parent.torch
        assert owner == uid == 1000
        # the wheels stayed in the build stage: no step of the image's history touched them
        assert not any("/tmp/wheels" in line for line in engine.history(child_ref))
    finally:
        engine.close()
    sbom = tmp_path / "team-ext.cdx.json"
    r = run_cli("sbom", "team-ext", "--lock", str(lock), "-o", str(sbom), "--url", podman_service)
    assert r.code == 0, r.err
    doc = json.loads(sbom.read_text())
    purls = {c["purl"] for c in doc["components"] if "purl" in c}  # the image itself has none
    assert "pkg:pypi/einops@0.8.1" in purls and "pkg:pypi/torch@2.13.0%2Bcpu" in purls
    assert any(c["bom-ref"] == f"oci:{parent.image_id}" for c in doc["components"])
    # read inside the image: the source package of a binary package, a supplier on each
    assert any(p.startswith("pkg:deb/debian/libssl3@") and "upstream=openssl" in p for p in purls)
    assert all(c.get("supplier", {}).get("name") for c in doc["components"])


def test_extend_refuses_a_requirement_that_would_replace_torch(
    run_cli: RunCli, podman_service: str, wheelhouse: Path, repo: str, tmp_path: Path
) -> None:
    reqs = tmp_path / "requirements.txt"
    reqs.write_text(f"{BENIGN}\ntorch>=2.14  # a newer torch: another build under verify's proof\n")
    extra = tmp_path / "extra-wheels"
    r = run_cli(
        "extend", CPU_CELL, "-r", str(reqs), "--url", podman_service,
        "--wheelhouse", str(wheelhouse), "--extra-wheelhouse", str(extra),
        "--lock", str(tmp_path / "lock.json"), "--repository", repo,
    )  # fmt: skip
    assert r.code == 2, r.out + r.err
    assert "refused before any build" in r.err
    assert "would replace torch 2.13.0+cpu" in r.err
    assert "torch>=2.14" in r.err
    assert "Traceback" not in r.err
    assert not extra.exists()  # nothing fetched, nothing built
    assert r.out == ""
