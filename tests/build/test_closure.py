"""The offline closure resolver: markers, extras, the newest fitting wheel, what is missing and
what conflicts - on tiny real wheels (zip + METADATA)."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.tags import Tag
from packaging.utils import canonicalize_name

from builder.build.closure import MetadataError, marker_environment, requires_dist, resolve
from builder.build.wheelhouse import scan
from tests.build.test_wheelhouse import fake_wheel_bytes

TAGS = frozenset({Tag("py3", "none", "any"), Tag("cp311", "cp311", "manylinux_2_28_x86_64")})
ENV = marker_environment("3.11")


def wheels(tmp_path: Path, spec: dict[str, tuple[str, ...]]) -> Path:
    for name, requires in spec.items():
        (tmp_path / name).write_bytes(fake_wheel_bytes(name, requires=requires))
    return tmp_path


def test_closure_follows_markers_extras_and_picks_the_newest(tmp_path: Path) -> None:
    d = wheels(
        tmp_path,
        {
            "app-1.0-py3-none-any.whl": (
                "lib>=1.0",
                'linuxonly; sys_platform == "linux"',
                'macos; sys_platform == "darwin"',
                'old; python_version < "3.10"',
                'extra1; extra == "fast"',
            ),
            "lib-1.0-py3-none-any.whl": (),
            "lib-1.2-py3-none-any.whl": ("leaf==2.0",),
            "lib-9.0-cp312-cp312-manylinux_2_28_x86_64.whl": (),  # another Python
            "leaf-2.0-py3-none-any.whl": (),
            "linuxonly-1.0-py3-none-any.whl": (),
            "extra1-1.0-py3-none-any.whl": (),
        },
    )
    res = resolve(["app==1.0"], scan(d), TAGS, ENV)
    assert res.complete
    assert [f"{w.name}-{w.version}" for w in res.chosen] == [
        "app-1.0",
        "lib-1.2",
        "linuxonly-1.0",
        "leaf-2.0",
    ]
    assert res.needed_by[canonicalize_name("leaf")] == "lib 1.2"
    with_extra = resolve(["app[fast]==1.0"], scan(d), TAGS, ENV)
    assert "extra1" in {w.name for w in with_extra.chosen}


def test_missing_and_conflicting_are_named(tmp_path: Path) -> None:
    d = wheels(
        tmp_path,
        {
            "app-1.0-py3-none-any.whl": ("lib<2", "gone>=3"),
            "lib-2.0-py3-none-any.whl": (),
        },
    )
    res = resolve(["app==1.0", "lib==2.0"], scan(d), TAGS, ENV)
    assert not res.complete
    assert [str(m) for m in res.missing] == ["gone>=3 (needed by app 1.0)"]
    assert res.conflicts == ("lib 2.0 is chosen but app 1.0 needs lib<2",)


def test_a_file_that_is_not_a_wheel_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "app-1.0-py3-none-any.whl"
    bad.write_bytes(b"not a zip")
    with pytest.raises(MetadataError, match=r"app-1\.0-py3-none-any\.whl is not a readable wheel"):
        requires_dist(bad)
