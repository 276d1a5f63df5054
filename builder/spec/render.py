"""Cell -> Containerfile text through Jinja2, and its drift from images/ (pure: reads only).

The environment is strict: an undefined name is an error, never an empty string. Values reach
shell lines only through the `q`, `rpm` and `deb` filters (single-quoted after the matrix
patterns have already refused quotes), and ENV/LABEL values only through `dq`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import jinja2

from builder import __version__
from builder.errors import RenderError
from builder.facts import cuda as cuda_rules
from builder.matrix.model import Cell, Pin, Project
from builder.spec import layout, wheel_groups
from builder.spec.labels import BUILD_LABEL_ARGS, CELL_HASH_LABEL, cell_labels, env, wheel_links
from builder.spec.os_install import OS_STAGE, os_install
from builder.spec.pip_pins import pip_pins

# The blocks every image shares, at the top of the project (beside matrix.yaml and images/);
# one template per OS family extends it from TEMPLATE_DIR: <family>.Containerfile.j2.
BASE_TEMPLATE = "Containerfile.base"
TEMPLATE_DIR = Path("images") / "templates"
OUTPUT_NAME = "Containerfile"
HEADER = "# Rendered by trainimg"

_UNSAFE_SINGLE = re.compile(r"['\n\r\x00]")
_UNSAFE_DOUBLE = re.compile(r"[\"\\$`\n\r\x00]")


def _q(value: object) -> str:
    text = str(value)
    if _UNSAFE_SINGLE.search(text):
        raise RenderError(f"refusing to put {text!r} on a shell line: it holds a quote or newline")
    return f"'{text}'"


def _dq(value: object) -> str:
    text = str(value)
    if _UNSAFE_DOUBLE.search(text):
        raise RenderError(f'refusing to put {text!r} in ENV/LABEL: it holds " \\ $ ` or a newline')
    return f'"{text}"'


def _rpm(pin: Pin) -> str:
    """dnf's spec: name-VERSION or name-[EPOCH:]VERSION-RELEASE; an OS series pin installs by
    name, an NVIDIA branch series as name-BRANCH.* (the template checks the installed version
    against the series after)."""
    if pin.series and pin.glob:
        return _q(f"{pin.name}-{pin.version}.*")
    return _q(f"{pin.name}-{pin.version}" if pin.version and not pin.series else pin.name)


def _deb(pin: Pin) -> str:
    return _q(f"{pin.name}={pin.version}" if pin.version else pin.name)


def environment(root: Path) -> jinja2.Environment:
    """Templates come from TEMPLATE_DIR, then the project's top (where BASE_TEMPLATE is)."""
    env_ = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(root / TEMPLATE_DIR), str(root)]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=False,
        lstrip_blocks=False,
        autoescape=False,  # noqa: S701 - Containerfiles, not HTML; values are pattern-checked
    )
    env_.filters.update(q=_q, dq=_dq, rpm=_rpm, deb=_deb)
    return env_


def template_vars(cell: Cell, project: Project) -> dict[str, Any]:
    """Every variable a template may use, derived from the cell and the facts."""
    install = os_install(cell)
    os_pins, repo, devel = list(install.os_pins), install.cuda_repo, list(install.devel_pins)
    labels_ = cell_labels(cell, project)
    labels_[CELL_HASH_LABEL] = cell.cell_hash
    return {
        "version": __version__,
        "cell": cell,
        "cell_hash": cell.cell_hash,
        "base_ref": cell.os.base_ref,
        "os_stage": OS_STAGE,
        "pinned": bool(cell.os.digest or cell.os.local),  # as io.trainimg.base.pinned says
        "base_local": cell.os.local,
        "os_mirror": cell.os.mirror,
        "os_series": [p for p in (*os_pins, *install.gcc_pins) if p.series],
        "devel_series": [p for p in devel if p.series],
        "cuda_series": [p for p in repo.runtime if p.series] if repo else [],
        "compat_dir": layout.COMPAT_DIR
        if repo and any(p.name.startswith("cuda-compat-") for p in repo.runtime)
        else "",
        "os_pins": os_pins,
        "cuda_repo": repo,
        "devel_repos": list(cell.os.devel_repos) if cell.flavour == "devel" else [],
        "cuda_version": str(cell.cuda.version) if cell.cuda else "",
        "cuda_minor": cuda_rules.minor(cell.cuda.version) if cell.cuda else "",
        # the toolkit's directory beside the link, relative: the link holds inside any root
        "cuda_link_target": PurePosixPath(layout.cuda_home(cell.cuda.version)).name
        if cell.cuda
        else "",
        "devel_pins": devel,
        "wheel_links": wheel_links(cell),
        "link_dir": layout.LINK_DIR,
        "gcc_pins": cell.os.gcc.get(cell.gcc, ()),
        "python_bin": f"python{cell.python}",
        "pip_requirements": pip_pins(cell),
        "wheel_groups": wheel_groups.groups(cell),
        "trim": wheel_groups.trim(cell),
        "test_trees": wheel_groups.TEST_TREES,
        "nvidia_injected": layout.NVIDIA_INJECTED if cell.cuda is not None else "",
        "env": env(cell),
        "labels": labels_,
        "build_label_args": BUILD_LABEL_ARGS,
    } | layout_vars()


def layout_vars() -> dict[str, Any]:
    """The image layout (builder/spec/layout.py) as the templates name it."""
    return {
        "venv": layout.VENV,
        "venv_python": layout.VENV_PYTHON,
        "venv_pip": layout.VENV_PIP,
        "trainer_home": layout.TRAINER_HOME,
        "trainer_module": layout.TRAINER_MODULE,
        "entrypoint": list(layout.ENTRYPOINT),
        "cmd": list(layout.CMD),
        "uid": layout.USER_ID,
        "user_name": layout.USER_NAME,
        "user_home": layout.USER_HOME,
        "workdir": layout.WORKDIR,
        "shared_dirs": layout.SHARED_DIRS,
        "volumes": (layout.WORKDIR, layout.DATA_DIR, layout.CKPT_DIR),
        "shared_mode": layout.SHARED_MODE,
        "cuda_link": layout.CUDA_LINK,
    }


def render_cell(jenv: jinja2.Environment, cell: Cell, project: Project) -> str:
    name = f"{cell.os.distro.template_family}.Containerfile.j2"
    try:
        template = jenv.get_template(name)
        text = template.render(template_vars(cell, project))
    except jinja2.TemplateNotFound as exc:
        needs = f"{TEMPLATE_DIR}/{name}" if exc.name == name else exc.name
        raise RenderError(
            f"template {exc.name} not found (looked in {TEMPLATE_DIR}/ and the project's top, "
            f"beside matrix.yaml): the {cell.os.family} family needs {needs}"
        ) from None
    except jinja2.UndefinedError as exc:
        raise RenderError(f"template {name} for cell {cell.name}: {exc.message}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise RenderError(f"{exc.filename or exc.name}:{exc.lineno}: {exc.message}") from None
    return _tidy(text)


def _tidy(text: str) -> str:
    """Collapse runs of blank lines and end with exactly one newline: stable output."""
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n") + "\n"


def render_all(root: Path, cells: tuple[Cell, ...], project: Project) -> dict[Path, str]:
    """images/<cell>/Containerfile -> text, for every cell. Pure apart from reading templates."""
    jenv = environment(root)
    return {Path("images") / c.name / OUTPUT_NAME: render_cell(jenv, c, project) for c in cells}


@dataclass(frozen=True)
class Drift:
    missing: tuple[Path, ...]
    changed: tuple[Path, ...]
    stale: tuple[Path, ...]

    @property
    def clean(self) -> bool:
        return not (self.missing or self.changed or self.stale)


def rendered_outputs(root: Path) -> set[Path]:
    """Containerfiles under images/ that trainimg wrote (they start with its header)."""
    found = set()
    for path in sorted((root / "images").glob(f"*/{OUTPUT_NAME}")):
        try:
            head = path.read_text(encoding="utf-8")[: len(HEADER)]
        except (OSError, UnicodeDecodeError):
            continue
        if head == HEADER:
            found.add(path.relative_to(root))
    return found


def drift(root: Path, outputs: dict[Path, str]) -> Drift:
    missing, changed = [], []
    for rel, text in sorted(outputs.items()):
        path = root / rel
        if not path.exists():
            missing.append(rel)
        elif path.read_text(encoding="utf-8") != text:
            changed.append(rel)
    stale = sorted(rendered_outputs(root) - set(outputs))
    return Drift(tuple(missing), tuple(changed), tuple(stale))
