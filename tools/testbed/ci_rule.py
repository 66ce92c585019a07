"""The CI rule for the Python tests (tests/support/ci_rule.h for the C++
ones, docs/testbed.md): a test that cannot run here skips (exit 77) outside
CI and fails under it (CI set, and not "", "0" or "false")."""
from __future__ import annotations

import os

SKIP = 77


def under_ci() -> bool:
    return os.environ.get("CI", "") not in ("", "0", "false", "False", "FALSE")


def skip(reason: str) -> int:
    """The exit code for a test that cannot run, with the reason printed."""
    if under_ci():
        print(f"FAIL (CI must run this test): {reason}")
        return 1
    print(f"SKIP: {reason}")
    return SKIP
