"""The render filters that put values on shell lines (`q`) and into ENV/LABEL (`dq`): a value
they cannot quote safely is refused, whatever the matrix validation let through."""

from __future__ import annotations

import pytest

from builder.errors import RenderError
from builder.spec.render import _dq, _q


@pytest.mark.parametrize("bad", ["a'b", "x\ny", "\x00"])
def test_single_quote_filter_refuses(bad: str) -> None:
    with pytest.raises(RenderError, match="refusing"):
        _q(bad)


@pytest.mark.parametrize("bad", ['a"b', "a\\b", "$HOME", "`id`", "x\ny"])
def test_double_quote_filter_refuses(bad: str) -> None:
    with pytest.raises(RenderError, match="refusing"):
        _dq(bad)
