"""What a cell's os stage installs from package repositories - the OS packages, the compiler,
NVIDIA's CUDA repository and the devel toolchain - and so whether that stage needs a network.
Pure: the template (render.py), the build plan's network choice and the pin rules read it."""

from __future__ import annotations

from dataclasses import dataclass

from builder.matrix.model import Cell, CudaRepo, Pin

OS_STAGE = "os"  # the base template's first stage: the base image and its OS packages


@dataclass(frozen=True)
class OsInstall:
    """What the os stage installs from package repositories: OS packages (and the compiler),
    NVIDIA's CUDA repository with its packages, and the devel flavour's toolchain."""

    os_pins: tuple[Pin, ...]
    gcc_pins: tuple[Pin, ...]
    cuda_repo: CudaRepo | None
    devel_pins: tuple[Pin, ...]

    @property
    def downloads(self) -> bool:
        """Whether the os stage's RUNs fetch packages, so need a network (or a mirror)."""
        return bool(self.os_pins or self.cuda_repo or self.devel_pins)


def os_install(cell: Cell) -> OsInstall:
    py = cell.os.python.get(cell.python)
    os_pins = [py] if py is not None and (py.version or cell.os.distro.is_el) else []
    os_pins += list(cell.os.packages)
    repo = cell.cuda.repos.get(cell.os.family) if cell.cuda else None
    devel: list[Pin] = []
    if cell.flavour == "devel":
        devel += cell.os.devel_packages
        devel += repo.devel if repo else ()
    gcc = cell.os.gcc.get(cell.gcc, ()) if cell.os.distro.is_el else ()
    return OsInstall(tuple(os_pins), tuple(gcc), repo, tuple(devel))
