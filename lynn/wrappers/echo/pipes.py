"""Waiting on worker pipes, typed: shared by the vector env and the actor-learner's local pool."""

from __future__ import annotations

from collections.abc import Iterable
from multiprocessing.connection import Connection, wait
from typing import cast


def wait_pipes(pipes: Iterable[Connection], timeout: float | None) -> list[Connection]:
    """The pipes of ``pipes`` that are ready to read (or closed), waiting up to ``timeout`` seconds.

    ``multiprocessing.connection.wait`` returns some of the objects it was given; typeshed widens its
    result to sockets and file descriptors, so this narrows it back to the pipes passed in.
    """
    return cast(list[Connection], wait(list(pipes), timeout=timeout))
