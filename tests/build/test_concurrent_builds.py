"""Two `trainimg build` at once on one isolated podman store ($TRAINIMG_PODMAN_ROOT, no service
running): the first starts the API service, the second shares it, the one that ends first does
not stop it under the other (engines/service_users.py), the last one out stops it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from builder.build.base_image import BaseSpec, make_offline_base
from builder.engines.discover import unix_ping
from builder.engines.local_podman import LocalPodman
from tests.build.test_cli_build import SLOW, TINY
from tests.conftest import BASE_TAG, CACHE
from tests.engines.dockerd import unmount_all
from tests.helpers import MakeProject

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def test_two_builds_at_once_share_the_service(
    make_project: MakeProject,
    wheelhouse: Path,
    trainer_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in ("CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF"):  # configure() exports its own:
        if var in os.environ:  # put the session store's back afterwards
            monkeypatch.setenv(var, os.environ[var])
        else:
            monkeypatch.delenv(var, raising=False)
    local = LocalPodman(tmp_path / "store")
    env = {**os.environ, **local.configure(), "TRAINIMG_PODMAN_ROOT": str(local.root)}
    for var in ("CONTAINER_HOST", "DOCKER_HOST"):
        env.pop(var, None)
    try:
        url = local.start_service()
        from builder.engines.podman import PodmanEngine

        engine = PodmanEngine(url)
        try:
            make_offline_base(BaseSpec(tag=BASE_TAG), CACHE / "base", engine)
        finally:
            engine.close()
        local.stop_service()
        assert not unix_ping(local.socket_path)  # nothing serves the store now
        procs = []
        for i, template in enumerate((TINY, SLOW)):  # the first ends first
            matrix = make_project(template)
            cmd = [sys.executable, "-m", "builder.cli", "build", "--matrix", str(matrix),
                   "--wheelhouse", str(wheelhouse), "--trainer", str(trainer_dir), "--lock",
                   str(tmp_path / "lock.json"), "--repository", f"localhost/conc{i}"]  # fmt: skip
            out = subprocess.PIPE
            procs.append(
                subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
            )
            time.sleep(1.0)
        outs = [p.communicate(timeout=600)[0] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        assert not unix_ping(local.socket_path)  # the last one out stopped it
        assert (local.root / "run" / "service.users").read_text() == ""
    finally:
        local.stop_service()
        local.podman("unmount", "--all", check=False)
        assert unmount_all(local.root) == []
        shutil.rmtree(local.runroot.parent, ignore_errors=True)
