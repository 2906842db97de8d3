"""Test-wide settings. Reference environments live in tests/reference_envs.py.

scripts/test runs the suite in two parts: everything but the tests marked ``alone``, two at a
time (pytest-xdist, ``--without-alone``), then the ``alone`` tests, which judge the machine's
CPU use or timing and so need it to themselves (``--only-alone``). Both options compose with
``-m`` and with paths.
"""

import sys
from pathlib import Path

import pytest

# Let tests import their shared modules (reference_envs, browser) by name.
sys.path.insert(0, str(Path(__file__).resolve().parent))

# The S3 server (SeaweedFS) the storage tests write to: fixtures s3_server and s3_url.
from seaweedfs import s3_server, s3_url  # noqa: F401


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trainprobe")
    group.addoption("--only-alone", action="store_true", help="run only the tests marked alone")
    group.addoption("--without-alone", action="store_true", help="leave out the tests marked alone")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    only, without = config.getoption("--only-alone"), config.getoption("--without-alone")
    if not (only or without):
        return
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        alone = item.get_closest_marker("alone") is not None
        (keep if alone == only else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
