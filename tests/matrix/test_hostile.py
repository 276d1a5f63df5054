"""Hostile matrix values: nothing with shell metacharacters, quotes or newlines gets through,
and the error names the key path and the offending value."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builder.errors import MatrixError
from builder.matrix import validate as v
from builder.matrix.load import parse_matrix
from tests.matrices import variant

HOSTILE = ["x;rm -rf /", "$(id)", "`id`", "a'b", 'a"b', "a\nRUN id", "a b;c", "a|b", "a&&b", "a>b"]


def _yaml_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@pytest.mark.parametrize(
    ("field", "old", "template", "prefix"),
    [
        ("oses.rocky9.base", "base: quay.io/rockylinux/rockylinux:9.6", "base: {}", "quay.io/x"),
        ("oses.rocky9.python.3.12.version", 'version: "3.12"', "version: {}", "3.12"),
        ("oses.rocky9.packages.shadow-utils", 'shadow-utils: "4.9"', "shadow-utils: {}", "4"),
        (
            "cuda.12.8.1.el9.repo",
            "repo: https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64",
            "repo: {}",
            "https://example.org/",
        ),
        ("python_packages.numpy", "numpy: 2.3.5", "numpy: {}", "2.3"),
        ("groups[0].axes.torch[0]", "torch: [2.9.1, 2.11.0]", "torch: [{}, 2.11.0]", "2.9"),
        ("groups[0].axes.gcc[0]", 'gcc: ["11"]', "gcc: [{}]", "11"),
        (
            "groups[0].exclude[0].reason.text",
            "text: one devel image is enough for the tests",
            "text: {}",
            "why",
        ),
    ],
)
@pytest.mark.parametrize("payload", HOSTILE)
def test_hostile_value_is_rejected_with_its_key_path(
    field: str, old: str, template: str, prefix: str, payload: str
) -> None:
    with pytest.raises(MatrixError) as exc:
        parse_matrix(variant((old, template.format(_yaml_str(prefix + payload)))), "m.yaml")
    err = exc.value
    assert err.keypath == field
    assert err.line is not None
    assert repr(prefix + payload)[:40] in err.message


def test_hostile_package_name_key() -> None:
    with pytest.raises(MatrixError, match=r"oses\.rocky9\.packages\.a;b: invalid package name"):
        parse_matrix(variant(('shadow-utils: "4.9"', '"a;b": "1.0"')), "m.yaml")


def test_unknown_keys_are_rejected_anywhere() -> None:
    with pytest.raises(MatrixError, match=r"drivers\.r580-open\.run: unknown key 'run'"):
        parse_matrix(variant(("kernel_module: open}", 'kernel_module: open, run: "id"}')), "m.yaml")


SHELL_META = re.compile(r"[;&|$`'\"\\<>(){}\s*?!#~]")
PATTERNS = [
    v.VERSION,
    v.RPM_VERSION,
    v.PACKAGE,
    v.IMAGE_REF,
    v.DIGEST,
    v.KEY,
    v.PYTHON,
    v.GCC,
    v.DRIVER_VERSION,
    v.CELL_NAME,
    v.SHA256,
]


@pytest.mark.parametrize("pattern", PATTERNS, ids=[p.name for p in PATTERNS])
@given(text=st.text(min_size=1, max_size=40))
def test_patterns_never_admit_shell_metacharacters(pattern: v.Pattern, text: str) -> None:
    if pattern.matches(text):
        assert not SHELL_META.search(text)
        assert "\n" not in text


@given(text=st.text(max_size=40))
def test_package_versions_admit_only_a_trailing_series_glob(text: str) -> None:
    if v.PACKAGE_VERSION.matches(text):
        assert not SHELL_META.search(text.removesuffix(".*"))
