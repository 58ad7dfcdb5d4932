"""Run a slow test's per-instance loop in two processes at once: half here, half in a spawned child with its
own env (site server + Chromium). One episode leaves the cores idle part of the time (Python, the driver,
the browser and the renderer wait on each other), so two at a time finish sooner on 2 cores: measured on
this machine beside other jobs, the expert loop 90 s -> 60 s and the fast-click lockstep loop 322 s -> 270 s
(same code, LYNN_TEST_PROCESSES=1 against 2, back to back); not under ``make test``, whose workers already
fill the cores (see :func:`processes`). The test still asserts over every instance's
result, in the parent; only where the episodes run changes.

``LYNN_TEST_PROCESSES=1`` runs the loop serially in the test's own process (to debug one instance).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def processes() -> int:
    """How many processes share a loop: 2 on a machine with 2 or more cores, else 1; and 1 under pytest-xdist
    with as many workers as cores (``make test``), where the other workers keep the cores busy already and a
    second process would only add its own start (an interpreter, a site server, a browser: ~3 CPU-s a test)."""
    wanted = os.environ.get("LYNN_TEST_PROCESSES")
    if wanted:
        return max(1, int(wanted))
    cores = os.cpu_count() or 1
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) >= cores:
        return 1
    return 2 if cores >= 2 else 1


def in_two(work: Callable[[Any, list[T]], list[Any]], items: Sequence[T], here: Any) -> list[Any]:
    """``work(here, items)`` split over this process and a spawned one; one result per item, in order.

    Args:
        work: a module-level function (the child imports it by name): ``work(resource, items)`` runs every
            item on ``resource`` and returns one picklable result per item. In the child ``resource`` is
            ``None``: ``work`` builds its own (and closes it).
        items: the instances, in the order the results come back.
        here: this process's resource (a test fixture's env), used for every other item.

    An exception in the child (an assertion inside ``work`` included) is raised here with its message.
    """
    items = list(items)
    if processes() < 2 or len(items) < 2:
        return work(here, items)
    mine, theirs = items[0::2], items[1::2]
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        child = pool.submit(work, None, theirs)
        got_mine = work(here, mine)
        got_theirs = child.result()
    out: list[Any] = [None] * len(items)
    out[0::2], out[1::2] = got_mine, got_theirs
    return out
