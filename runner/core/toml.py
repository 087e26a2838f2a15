"""The one TOML reader of specs, overrides and stored specs: the standard library's ``tomllib`` where
its errors carry their line and column (Python 3.14 on), else ``tomli`` 2.1+ (the same parser, whose
errors have them). A spec error names ``FILE:LINE:COLUMN``; the ``tomllib`` of Python 3.11-3.13
says only "(at line 2, column 5)" in its text, so ``tomli`` is a dependency there only.
"""

from __future__ import annotations

import sys

if sys.version_info >= (3, 14):  # pragma: no cover  (the suite runs on the 3.11 the project sets up)
    from tomllib import TOMLDecodeError, loads
else:
    from tomli import TOMLDecodeError, loads

__all__ = ["TOMLDecodeError", "loads"]
