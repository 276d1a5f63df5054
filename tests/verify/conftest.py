"""Fixtures of the verify tests end to end: a real podman, the CPU cell image and images broken
on purpose. The CUDA parts they share with the arches tests are tests/cuda_fixtures.py's."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

BROKEN = {
    # a label that lies about torch: torch_version and labels must fail
    "wrong-torch-label": 'LABEL io.trainimg.torch.version="9.9.9"\n',
    # runs as root: default_user_not_root must fail
    "root-user": "USER root\n",
    # a trainer whose `train` crashes (`info` still works): the training checks must fail
    "crashing-trainer": (
        "USER root\n"
        "RUN printf '%s\\n' 'import sys' "
        '\'if sys.argv[1:2] == ["train"]: sys.exit("trainer crashed on purpose")\' '
        "'from trainer.cli import main' 'sys.exit(main())' "
        "> /opt/trainimg/trainer/__main__.py\n"
        "USER 1000:1000\n"
    ),
}
# The layout before images ran under any uid: home and /ckpt uid 1000's alone, no USER for
# getpass. Only train_any_uid fails (before any training); kept out of BROKEN, whose images
# test_no_container_left_after_20_runs rotates through expecting failures from other checks.
UID_1000_ONLY = (
    "USER root\n"
    "RUN chown 1000:1000 /ckpt /home/trainer && chmod 755 /ckpt /home/trainer\n"
    'ENV USER="" LOGNAME=""\n'
    "USER 1000:1000\n"
)


@pytest.fixture(scope="session")
def verify_engine(podman_service: str) -> Iterator[Any]:
    """The podman engine (podman-py, libpod API) on the test session's podman service."""
    from builder.engines.podman import PodmanEngine

    engine = PodmanEngine(podman_service)
    try:
        yield engine
    finally:
        engine.close()


@pytest.fixture(scope="session")
def verify_cpu_image(request: pytest.FixtureRequest, local_podman: Any) -> str:
    """The CPU cell's image: the build tests' `cpu_image` (built by trainimg's builder through
    podman-py, air-gapped), or $TRAINIMG_VERIFY_IMAGE (already in the test store)."""
    ref = os.environ.get("TRAINIMG_VERIFY_IMAGE")
    if not ref:
        if not (REPO / "trainer" / "__main__.py").is_file():
            pytest.skip(
                "the CPU image would bundle the build tests' stand-in trainer (no "
                "trainer/ in this tree): its training checks could not pass"
            )
        ref = str(request.getfixturevalue("cpu_image"))
    local_podman.podman("image", "inspect", "--format", "{{.Id}}", ref)
    return ref


@pytest.fixture(scope="session")
def broken_images(
    verify_cpu_image: str, local_podman: Any, tmp_path_factory: Any
) -> dict[str, str]:
    """Images derived from the CPU image by one-line Containerfiles, each broken on purpose."""
    out = {}
    for name, body in (*BROKEN.items(), ("uid-1000-only", UID_1000_ONLY)):
        ctx = tmp_path_factory.mktemp(name)
        (ctx / "Containerfile").write_text(f"FROM {verify_cpu_image}\n{body}")
        tag = f"localhost/trainimg-verify-broken:{name}"
        local_podman.podman("build", "--pull=never", "--network", "none", "-t", tag, str(ctx))
        out[name] = tag
    return out


@pytest.fixture(scope="session")
def verify_docker_engine(podman_service: str) -> Iterator[Any]:
    """The docker SDK engine on podman's Docker-compatible API: verify then goes through
    testinfra's docker:// backend (the docker CLI, DOCKER_HOST pointing at the socket)."""
    if shutil.which("docker") is None:
        pytest.skip("the docker CLI is not installed (testinfra's docker:// backend runs it)")
    from builder.engines.docker import DockerEngine

    engine = DockerEngine(podman_service)
    try:
        yield engine
    finally:
        engine.close()
