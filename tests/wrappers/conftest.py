from __future__ import annotations

import multiprocessing.resource_tracker as resource_tracker

import pytest


@pytest.fixture(autouse=True, scope="module")
def _stop_resource_tracker():
    """Spawned workers start multiprocessing's resource-tracker helper, which lives until the
    interpreter exits; stop it after each module so the suite's leftover-process check stays exact
    (it restarts on demand)."""
    yield
    resource_tracker._resource_tracker._stop()
