"""Test code, where the host-device sync rules (TRN1xx) say nothing.

A sync in a test's loop costs a test a few milliseconds; the advice to batch copies or read a
value less often is pointless there (the blind second reading of accelerate's findings judged
exactly that, docs/rules.md). The fused-op rules still apply: a naive kernel in a test helper is
still a naive kernel.
"""

from __future__ import annotations

import re

# `tests/`, `test/`, `testing/`, `test_utils/` folders; `test_*.py`, `*_test.py`, `conftest.py`.
_TEST_PATH = re.compile(
    r"(^|[/\\])(tests?|testing|test_utils)[/\\]|(^|[/\\])(test_[^/\\]*|[^/\\]*_test|conftest)\.py$"
)


def is_test_path(path: str) -> bool:
    return bool(_TEST_PATH.search(path))
