"""Build a session fixture's files once per test run, also under pytest-xdist.

Each xdist worker is a pytest session of its own, so a plain ``scope="session"`` fixture that trains a
model or records episodes would run once per worker. :func:`built_once` builds into a folder beside the
workers' own temporary folders (the run's shared base), under a file lock: the first worker to ask
builds, the others wait and reuse its files. Without xdist it is ``tmp_path_factory.mktemp``.
:func:`one_at_a_time` serialises a resource two workers must not hold at once (a local Ray cluster)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest
from filelock import FileLock

T = TypeVar("T")


def _worker() -> str | None:
    return os.environ.get("PYTEST_XDIST_WORKER")


def built_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], T]
) -> tuple[Path, T | None]:
    """``(folder, result)``: ``build(folder)`` ran in this process (result is its value) or in another
    worker of this run (result ``None``; the folder holds what that call wrote)."""
    if _worker() is None:
        out = tmp_path_factory.mktemp(name)
        return out, build(out)
    shared = tmp_path_factory.getbasetemp().parent / "shared"
    shared.mkdir(exist_ok=True)
    out, done = shared / name, shared / f"{name}.done"
    with FileLock(str(shared / f"{name}.lock")):
        if done.exists():
            return out, None
        out.mkdir(exist_ok=True)
        result = build(out)
        done.touch()  # only a finished build is reused; a failed one is retried (and fails) in the next worker
        return out, result


@contextmanager
def one_at_a_time(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[None]:
    """Hold a run-wide lock named ``name`` (no-op without xdist)."""
    if _worker() is None:
        yield
        return
    with FileLock(str(tmp_path_factory.getbasetemp().parent / f"{name}.lock")):
        yield


@pytest.fixture(scope="module", autouse=True)
def one_ray_cluster_at_a_time(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Imported by the test modules that start a local Ray cluster (autouse there): under pytest-xdist
    they run one at a time."""
    with one_at_a_time(tmp_path_factory, "ray"):
        yield
