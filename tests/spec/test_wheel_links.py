"""A CUDA devel image links the math libraries and NCCL by name: the rendered RUN line makes
lib<name>.so links to the wheels' lib<name>.so.N in layout.LINK_DIR, which the image's
LIBRARY_PATH names, and fails the build when a wheel lacks its library.

The engine half runs that exact line in a container of the offline base (it has gcc) over
stand-in wheel libraries built there with the wheels' sonames (cuBLAS's, NCCL's and cuDNN's
real files are GBs and need a cu128 closure: tests/verify/test_cu128_image.py builds those),
then links a program with -lcublas -lcublasLt -lnccl -lcudnn through LIBRARY_PATH and runs it."""

from __future__ import annotations

import shlex
from collections.abc import Iterator

import pytest

from builder.engines.base import RunSpec
from builder.engines.podman import PodmanEngine
from builder.spec import layout
from builder.spec.labels import env, wheel_links
from builder.spec.render import environment, render_cell
from builder.workspace import open_workspace
from tests.conftest import BASE_TAG, REPO
from tests.el9.rehearsal import instructions

DEVEL = "rocky9-cu128-py3.12-torch2.9.1-devel"
TEST_LABEL = "io.trainimg.test"
# the wheels' sonames (nvidia-cublas-cu12 12.8, nvidia-nccl-cu12 2.x, nvidia-cudnn-cu12 9.x)
SONAME_MAJOR = {"cublas": "12", "cublasLt": "12", "nccl": "2", "cudnn": "9"}


def link_line() -> tuple[str, dict[str, str]]:
    ws = open_workspace(REPO / "matrix.yaml")
    cell = ws.cell(DEVEL)
    text = render_cell(environment(REPO), cell, ws.matrix.project)
    (line,) = [i for i in instructions(text) if i.startswith(f"RUN mkdir -p '{layout.LINK_DIR}'")]
    return line[4:], env(cell)


def test_a_cuda_devel_cell_renders_the_link_names_on_library_path() -> None:
    line, image_env = link_line()
    assert image_env["LIBRARY_PATH"].split(":")[0] == layout.LINK_DIR
    for lib in SONAME_MAJOR:
        assert f"'{layout.LINK_DIR}/lib{lib}.so'" in line
    ws = open_workspace(REPO / "matrix.yaml")
    runtime = ws.cell(DEVEL.replace("-devel", "-runtime"))
    assert wheel_links(runtime) == [] and "LIBRARY_PATH" not in env(runtime)


@pytest.fixture(scope="module")
def engine(podman_service: str, offline_base: str) -> Iterator[PodmanEngine]:
    e = PodmanEngine(podman_service)
    try:
        yield e
    finally:
        e.close()


def test_the_link_names_link_and_a_missing_library_fails(engine: PodmanEngine) -> None:
    line, image_env = link_line()
    ws = open_workspace(REPO / "matrix.yaml")
    stand_ins = []
    for prefix, link in wheel_links(ws.cell(DEVEL)):
        lib = link.rsplit("/lib", 1)[1].removesuffix(".so")
        so = f"{prefix}{SONAME_MAJOR[lib]}"
        stand_ins.append(
            f"mkdir -p {shlex.quote(so.rsplit('/', 1)[0])} && "
            f"echo 'int {lib}_standin(void) {{ return 1; }}' > /tmp/{lib}.c && "
            f"gcc -shared -fPIC -Wl,-soname,lib{lib}.so.{SONAME_MAJOR[lib]} "
            f"-o {shlex.quote(so)} /tmp/{lib}.c"
        )
    calls = " + ".join(f"{lib}_standin()" for lib in SONAME_MAJOR)
    protos = " ".join(f"int {lib}_standin(void);" for lib in SONAME_MAJOR)
    dirs = ":".join(sorted({p.rsplit("/", 1)[0] for p, _ in wheel_links(ws.cell(DEVEL))}))
    script = " && ".join(
        [
            *stand_ins,
            line,
            f"echo '{protos} int main(void) {{ return {calls} == 4 ? 0 : 1; }}' > /tmp/m.c",
            f"LIBRARY_PATH={shlex.quote(image_env['LIBRARY_PATH'])} gcc /tmp/m.c -o /tmp/m "
            + " ".join(f"-l{lib}" for lib in SONAME_MAJOR),
            f"LD_LIBRARY_PATH={dirs} /tmp/m",
            "echo LINKED",
            # the same line where the cuDNN wheel lacks its library: the build fails, saying so
            f"rm -rf {layout.LINK_DIR} "
            f"{shlex.quote(layout.venv_site_packages('3.12'))}/nvidia/cudnn/lib/*",
            f"{{ ( {line} ) 2>/tmp/err; echo rc=$?; cat /tmp/err; }}",
        ]
    )
    out = engine.run(
        RunSpec(
            BASE_TAG,
            entrypoint=["sh", "-c", script],
            network="none",
            labels={TEST_LABEL: "wheel-links"},
        ),
        timeout=300,
    )
    assert out.exit_code == 0, out.stdout + out.stderr
    assert "LINKED" in out.stdout, out.stdout + out.stderr
    assert "rc=1" in out.stdout
    assert "nvidia/cudnn/lib/libcudnn.so.N in the venv: cannot link" in out.stdout
