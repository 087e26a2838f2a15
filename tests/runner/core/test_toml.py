"""The one TOML reader: its errors carry the line and column a spec error names."""

from __future__ import annotations

import pytest

from runner.core import toml


def test_an_error_names_its_line_and_column():
    with pytest.raises(toml.TOMLDecodeError) as err:
        toml.loads("a = 1\nb = [1,\n  2,,]\n")
    assert (err.value.lineno, err.value.colno) == (3, 5) and err.value.msg
    assert toml.loads('v = "x"') == {"v": "x"}
