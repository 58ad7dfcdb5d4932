from __future__ import annotations

import multiprocessing.resource_tracker as resource_tracker
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="module")
def _stop_resource_tracker() -> Iterator[None]:
    """AsyncVectorEnv's spawned workers start multiprocessing's resource tracker, which lives until the
    interpreter exits; stop it after each module so the suite's leftover-process check stays exact."""
    yield
    resource_tracker._resource_tracker._stop()
