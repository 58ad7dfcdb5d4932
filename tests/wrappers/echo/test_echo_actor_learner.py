from __future__ import annotations

import time

import pytest

from lynn.wrappers.echo.actor_learner import ActorLearner
from tests.wrappers.echo._echo_envs import (
    VersionLearner,
    make_buggy_worker,
    make_dying_worker,
    make_sleep_worker,
)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def check_run(al: ActorLearner, learner: VersionLearner, stats, updates: int, staleness: int) -> None:
    """The invariants every run must satisfy, whatever the backend."""
    assert stats.updates == updates
    assert stats.rollouts_consumed == updates * al.R
    coord = al.coordinator
    ids = [rid for rid, _, _ in coord.consumed]
    assert len(ids) == len(set(ids))
    # The version tag the coordinator saw is the version of the weights the worker really used.
    assert all(step - used <= staleness for step, used in learner.seen)
    assert max(stats.staleness_hist) <= staleness
    assert stats.rollouts_dispatched == (
        stats.rollouts_consumed + stats.dropped_stale + stats.leftover + stats.abandoned + stats.lost
    )


@pytest.fixture(scope="module")
def pull_run():
    learner = VersionLearner(train_s=0.01)
    al = ActorLearner(make_sleep_worker, learner, mode="pull", num_workers=2, rollouts_per_update=3)
    try:
        stats = al.run(updates=8)
        yield al, learner, stats
    finally:
        al.close()


def test_pull_mode_is_on_policy_on_real_workers(pull_run) -> None:
    al, learner, stats = pull_run
    check_run(al, learner, stats, 8, staleness=0)
    assert all(step == used for step, used in learner.seen)
    assert stats.dropped_stale == 0 and stats.lost == 0 and stats.leftover == 0


def test_push_pull_bounded_staleness_and_fault_recovery() -> None:
    learner = VersionLearner(train_s=0.02)
    al = ActorLearner(
        make_sleep_worker,
        learner,
        mode="push_pull",
        num_workers=3,
        rollouts_per_update=3,
        staleness=2,
        kappa=2,
    )
    pids = al.pool.pids()
    try:
        stats = al.run(updates=10)
        check_run(al, learner, stats, 10, staleness=2)
        assert stats.lost == 0 and stats.worker_restarts == 0
        assert 0 < stats.utilisation <= 1 and stats.rollouts_per_s > 0

        # Kill a worker process mid-run: the run still finishes and reports the loss.
        learner.seen.clear()
        learner.on_update = lambda step: al.kill_worker(1) if step == 14 else None  # 4 updates into this run
        stats = al.run(updates=25)
        check_run(al, learner, stats, 25, staleness=2)
        assert stats.worker_restarts == 1
        assert stats.lost <= 1 and len(al.loss_reports) == stats.lost
        pids += al.pool.pids()
    finally:
        al.close()
    deadline = time.time() + 5
    while any(_alive(p) for p in pids) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)


def test_invalid_configuration_fails_before_starting_workers() -> None:
    with pytest.raises(ValueError, match="kappa"):
        ActorLearner(make_sleep_worker, VersionLearner(), staleness=1, kappa=3)
    with pytest.raises(ValueError, match="backend"):
        ActorLearner(make_sleep_worker, VersionLearner(), backend="slurm")


def test_worker_exception_stops_the_run_with_its_traceback() -> None:
    al = ActorLearner(
        make_buggy_worker, VersionLearner(), mode="push_pull", num_workers=1, rollouts_per_update=1
    )
    try:
        with pytest.raises(RuntimeError, match="bug in my rollout code"):
            al.run(updates=3, time_budget=60)
    finally:
        al.close()


def test_crash_loop_stops_the_run() -> None:
    al = ActorLearner(
        make_dying_worker,
        VersionLearner(),
        mode="pull",
        num_workers=1,
        rollouts_per_update=1,
        max_consecutive_failures=2,
    )
    try:
        with pytest.raises(RuntimeError, match="in a row"):
            al.run(updates=3, time_budget=60)
    finally:
        al.close()
