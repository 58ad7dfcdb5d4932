"""When S binds (N >> R), a rollout too stale to be consumed is dropped as stale, not refused as malformed.

``GRPOLearner`` keeps ``S + 2`` snapshots and its ``validate`` calls a group whose version is older
than those "malformed" (it cannot recompute its ratio). With many workers and one group per update
such groups arrive often (the third pass's S sweep at N=3, R=1 refused 3 of 21 as malformed, with a
warning each); the buffer would have dropped every one of them as stale anyway. The learner here is
the tests' VersionLearner with the same keep-``S + 2`` check.
"""

from __future__ import annotations

import functools
import logging
import time
from pathlib import Path

from lynn.wrappers.echo.actor_learner import ActorLearner
from tests.wrappers.echo._echo_envs import SleepWorker, VersionLearner


class KeepingLearner(VersionLearner):
    """Refuses, like GRPOLearner, a rollout older than the ``keep`` newest versions."""

    def __init__(self, keep: int, train_s: float) -> None:
        super().__init__(train_s=train_s)
        self.keep = keep

    def validate(self, data):
        v = data["weights_version"]
        if v < self.version - self.keep + 1:
            return f"version {v} is older than the {self.keep} snapshots kept"
        if data.get("bad"):
            return "marked bad"
        return None


def make_slow_worker(index: int) -> SleepWorker:
    return SleepWorker(index, rollout_s=0.05, skew=1.0)  # 0.05, 0.10, 0.15 s per rollout


class BadWorker(SleepWorker):
    """Every rollout is malformed (and fresh enough to be consumed): refused, as before."""

    def __init__(self, index: int, marker: str) -> None:
        super().__init__(index, rollout_s=0.01)
        self.marker = marker

    def rollout(self, seed: int):
        data = {**super().rollout(seed), "bad": True}
        Path(self.marker).touch()
        return data


class GoodAfterBadWorker(SleepWorker):
    """Waits for the bad worker's first rollout before its own first one.

    Without the wait, a bad worker whose process is slow to spawn (CI under load) delivered nothing
    before the good worker had fed all six updates, and nothing was refused.
    """

    def __init__(self, index: int, marker: str) -> None:
        super().__init__(index, rollout_s=0.01)
        self.marker = marker

    def rollout(self, seed: int):
        deadline = time.monotonic() + 120.0
        while not Path(self.marker).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return super().rollout(seed)


def make_bad_worker(index: int, marker: str) -> SleepWorker:
    return BadWorker(index, marker) if index == 0 else GoodAfterBadWorker(index, marker)


def test_too_stale_rollouts_are_dropped_not_refused(caplog) -> None:
    S = 0
    learner = KeepingLearner(keep=S + 2, train_s=0.01)
    al = ActorLearner(
        make_slow_worker, learner, mode="push_pull", num_workers=3, rollouts_per_update=1, staleness=S
    )
    with caplog.at_level(logging.WARNING, logger="lynn.echo"):
        try:
            stats = al.run(updates=25)
        finally:
            al.close()
    assert stats.updates == 25
    # Workers slower than two updates deliver groups older than the learner keeps: all stale drops.
    assert stats.dropped_stale > 0
    assert stats.refused == 0 and al.refusals == []
    assert not [r for r in caplog.records if "refused malformed" in r.getMessage()]
    assert max(stats.staleness_hist) <= S
    assert all(step - used <= S for step, used in learner.seen)


def test_a_malformed_fresh_rollout_is_still_refused(tmp_path) -> None:
    learner = KeepingLearner(keep=4, train_s=0.01)
    al = ActorLearner(
        functools.partial(make_bad_worker, marker=str(tmp_path / "bad-delivered")),
        learner,
        mode="push_pull",
        num_workers=2,
        rollouts_per_update=1,
        staleness=2,
    )
    try:
        stats = al.run(updates=6)
    finally:
        al.close()
    assert stats.updates == 6 and stats.refused > 0
    assert all("marked bad" in m for m in al.refusals)
