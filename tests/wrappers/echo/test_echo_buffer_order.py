"""Echo's coordinator on hand-written schedules: buffer order (freshest first), the staleness bound on
both sides, request dispatch in pull and push_pull mode, publication, and two simulations whose every
figure is worked out by hand in the comments."""

from __future__ import annotations

import pytest

from lynn.wrappers.echo.core import Coordinator, EchoStats, Rollout, SimWorker, simulate


def arrive(c: Coordinator, versions: list[int]) -> list[Rollout]:
    out = []
    for i, v in enumerate(versions):
        r = Rollout(100 + i, worker=i, version=v)
        c.arrived(i, r)
        out.append(r)
    return out


def advance(c: Coordinator, steps: int) -> None:
    for _ in range(steps):
        if c.updated():
            c.published(c.t)


def test_freshest_first_and_stable_within_a_version() -> None:
    c = Coordinator("push_pull", rollouts_per_update=3, staleness=3, kappa=1)
    advance(c, 3)
    arrive(c, [0, 2, 1, 3, 2, 0, 3])
    batch = c.take()
    assert [(r.rollout_id, r.version) for r in batch] == [(103, 3), (106, 3), (101, 2)]
    assert [(r.rollout_id, r.version) for r in c.buffer] == [(104, 2), (102, 1), (100, 0), (105, 0)]
    assert c.consumed == [(103, 3, 3), (106, 3, 3), (101, 2, 3)]
    assert dict(c.staleness_hist) == {0: 2, 1: 1}


def test_fifo_keeps_arrival_order() -> None:
    c = Coordinator("push_pull", rollouts_per_update=2, staleness=3, kappa=1, order="fifo")
    advance(c, 3)
    arrive(c, [0, 3, 1, 2])
    assert [r.version for r in c.take()] == [0, 3]
    assert [r.version for r in c.take()] == [1, 2]
    assert c.take() is None
    assert dict(c.staleness_hist) == {3: 1, 0: 1, 2: 1, 1: 1}


def test_staleness_bound_both_sides() -> None:
    c = Coordinator("push_pull", rollouts_per_update=1, staleness=2, kappa=1)
    arrive(c, [0, 1, 2])
    advance(c, 3)  # t = 3: version 1 is exactly S = 2 old, version 0 is 3 old
    assert c.drop_stale() == 1 and c.dropped_stale == 1
    assert [r.version for r in c.buffer] == [1, 2]
    assert c.drop_stale() == 0
    assert [r.version for r in c.take()] == [2]
    advance(c, 1)  # t = 4: version 1 is now 3 old
    assert c.take() is None and c.dropped_stale == 2 and c.buffer == []


def test_take_needs_r_consumable_rollouts() -> None:
    c = Coordinator("push_pull", rollouts_per_update=2, staleness=1, kappa=1)
    arrive(c, [0])
    assert c.take() is None and len(c.buffer) == 1  # kept for later, not consumed
    advance(c, 1)
    c.arrived(1, Rollout(200, 1, 1))
    assert [r.rollout_id for r in c.take()] == [200, 100]
    c.buffer.append(Rollout(100, 0, 1))  # the same rollout again
    c.buffer.append(Rollout(999, 0, 1))
    with pytest.raises(AssertionError, match="rollout 100 consumed twice"):
        c.take()


def test_push_pull_requests_go_to_every_idle_worker_at_the_published_version() -> None:
    c = Coordinator("push_pull", rollouts_per_update=1, staleness=2, kappa=2)
    assert c.requests([0, 1, 2]) == [(0, 0, 0), (1, 1, 0), (2, 2, 0)]
    assert c.requests([0, 1, 2]) == []  # all busy
    c.arrived(1, Rollout(1, 1, 0))
    assert c.updated() is False  # kappa 2: no publication after update 1
    assert c.requests([0, 1, 2]) == [(1, 3, 0)]
    assert c.updated() is True and c.t == 2
    c.published(2)
    c.arrived(0, Rollout(0, 0, 0))
    assert c.requests([2, 0]) == [(0, 4, 2)]
    assert c.dispatched == 5 and c.generated == 2 and c.publishes == 1
    c.close()
    c.arrived(0, Rollout(4, 0, 2))
    assert c.requests([0]) == [] and c.generated == 3


def test_pull_requests_exactly_r_per_version_and_reissues_lost_ones() -> None:
    c = Coordinator("pull", rollouts_per_update=2, staleness=5, kappa=3)
    assert (c.S, c.kappa) == (0, 1)  # pull is on-policy whatever was passed
    assert c.requests([0, 1, 2]) == [(0, 0, 0), (1, 1, 0)]
    assert c.requests([2]) == []  # R requests for this version already out
    assert c.worker_lost(1) == 1 and c.lost == 1
    assert c.worker_lost(1) == 0 and c.lost == 1  # nothing was in flight any more
    assert c.requests([2]) == [(2, 2, 0)]  # the lost one is asked again
    c.arrived(0, Rollout(0, 0, 0))
    c.arrived(2, Rollout(2, 2, 0))
    assert [r.rollout_id for r in c.take()] == [0, 2]
    assert c.updated() is True
    assert c.requests([0, 1]) == []  # version 1 not published yet
    c.published(1)
    assert c.requests([0, 1, 2]) == [(0, 3, 1), (1, 4, 1)]


def test_a_lost_request_of_an_older_version_is_not_reissued() -> None:
    c = Coordinator("push_pull", rollouts_per_update=1, staleness=1, kappa=1)
    c.requests([0, 1])
    advance(c, 1)
    assert c.step_requested == 0
    c.requests([])
    c.worker_lost(0)  # its request was for version 0, not the published 1
    assert c.step_requested == 0 and c.lost == 1


def test_a_refused_rollout_never_enters_the_buffer() -> None:
    c = Coordinator("pull", rollouts_per_update=2)
    c.requests([0, 1])
    c.refuse(0)
    assert c.refused == 1 and c.generated == 1 and c.buffer == [] and 0 not in c.in_flight
    assert c.requests([0]) == [(0, 2, 0)]  # pull mode asks again for it
    c.refuse(5)  # a worker with nothing in flight: counted, nothing re-asked
    assert c.refused == 2 and c.requests([5]) == []
    assert c.fill(EchoStats(mode="pull", backend="sim")).refused == 2


def test_fill_copies_every_counter() -> None:
    c = Coordinator("push_pull", rollouts_per_update=1, staleness=1, kappa=1)
    c.requests([0, 1, 2])
    c.arrived(0, Rollout(0, 0, 0))
    c.arrived(1, Rollout(1, 1, 0))
    c.take()
    advance(c, 2)
    c.worker_lost(2)
    c.drop_stale()
    s = c.fill(EchoStats(mode="push_pull", backend="sim"))
    assert (s.updates, s.rollouts_dispatched, s.rollouts_generated, s.rollouts_consumed) == (2, 3, 2, 1)
    assert (s.dropped_stale, s.lost, s.abandoned, s.leftover, s.publishes) == (1, 1, 0, 0, 2)
    assert s.staleness_hist == {0: 1}


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="mode must be one of"):
        Coordinator("push", 1)
    with pytest.raises(ValueError, match="rollouts_per_update must be at least 1"):
        Coordinator("pull", 0)
    with pytest.raises(ValueError, match="staleness must be >= 0"):
        Coordinator("push_pull", 1, staleness=-1)
    with pytest.raises(ValueError, match=r"kappa must be in \[1, staleness \+ 1\] = \[1, 3\], got 4"):
        Coordinator("push_pull", 1, staleness=2, kappa=4)
    with pytest.raises(ValueError, match="kappa must be in"):
        Coordinator("push_pull", 1, staleness=2, kappa=0)
    with pytest.raises(ValueError, match="order must be 'freshest' or 'fifo'"):
        Coordinator("push_pull", 1, order="oldest")
    assert Coordinator("push_pull", 1, staleness=2, kappa=3).kappa == 3


def test_simulated_pull_run_by_hand() -> None:
    # Two 1 s workers, R = 2, 1 s updates: requests at 0, 2, 4 (and 6, after the last update: in
    # flight at the end); updates run 1-2, 3-4, 5-6.
    stats, coord = simulate("pull", [SimWorker(1.0), SimWorker(1.0)], rollouts_per_update=2, updates=3)
    assert stats.wall_s == 6.0 and stats.learner_busy_s == 3.0
    assert stats.utilisation == pytest.approx(3 / 5) and stats.utilisation_total == pytest.approx(0.5)
    assert (stats.rollouts_dispatched, stats.rollouts_generated, stats.rollouts_consumed) == (8, 6, 6)
    assert stats.staleness_hist == {0: 6} and stats.publishes == 3 and stats.updates == 3
    assert stats.rollouts_per_s == pytest.approx(1.0) and stats.leftover == 0 and stats.abandoned == 2


def test_simulated_push_pull_run_by_hand() -> None:
    # One 1 s worker, R = 1, S = 1, 2 s updates. Rollouts (version) done at 1 (v0), 2 (v0), 3 (v0),
    # 4 (v1); updates 1-3 on the first (staleness 0) and 3-5 on the second (staleness 1); the 3 s and
    # 4 s rollouts are left over, the one started at 4 s is in flight at the end.
    stats, coord = simulate(
        "push_pull", [SimWorker(1.0)], rollouts_per_update=1, updates=2, staleness=1, kappa=1, train_s=2.0
    )
    assert stats.wall_s == 5.0 and stats.learner_busy_s == 4.0
    assert stats.utilisation == pytest.approx(1.0) and stats.utilisation_total == pytest.approx(0.8)
    assert stats.rollouts_generated == 4 and stats.rollouts_consumed == 2 and stats.rollouts_dispatched == 5
    assert stats.staleness_hist == {0: 1, 1: 1} and stats.leftover == 2 and stats.abandoned == 1
    assert coord.consumed == [(0, 0, 0), (1, 0, 1)]
    assert stats.rollouts_per_s == pytest.approx(0.8) and stats.publishes == 2


def test_simulated_broadcast_and_crash_by_hand() -> None:
    # pull, one worker, 1 s rollouts, 0.5 s broadcast of a new version (not of the one it holds: -1 at
    # first, so the first request pays it too). A crash at 0.2 s loses the first request; the worker is
    # back at 1.2 s and is asked again: 1.2 + 0.5 + 1 = 2.7; the update runs 2.7-3.7, then version 1 is
    # published and requested (in flight at the end).
    stats, coord = simulate(
        "pull",
        [SimWorker(1.0, crash_at=[0.2], restart_s=1.0)],
        rollouts_per_update=1,
        updates=1,
        bcast_s=0.5,
    )
    assert stats.wall_s == pytest.approx(3.7) and stats.lost == 1 and stats.worker_restarts == 1
    assert stats.rollouts_dispatched == 3 and stats.rollouts_generated == 1 and stats.updates == 1
    assert stats.abandoned == 1


def test_simulated_push_pull_prefers_fresh_rollouts() -> None:
    # Four fast workers, one slow learner. At each update's end every buffered rollout was made with
    # the version before, so 1 is the least staleness after the first update: freshest-first stays
    # there; fifo consumes the oldest rollout each time and climbs to the bound S = 3.
    workers = [SimWorker(0.25 + 0.01 * i) for i in range(4)]
    kw = dict(rollouts_per_update=1, updates=12, staleness=3, kappa=1, train_s=1.0)
    fresh, _ = simulate("push_pull", workers, order="freshest", **kw)
    fifo, _ = simulate("push_pull", workers, order="fifo", **kw)
    assert fresh.staleness_hist == {0: 1, 1: 11}
    assert fifo.staleness_hist == {0: 1, 1: 1, 2: 1, 3: 9} and fifo.dropped_stale > 0
    assert SimWorker(lambda k: 0.5 * (k + 1)).duration(3) == 2.0 and SimWorker(2).duration(0) == 2.0


def test_summary_line() -> None:
    s = EchoStats(mode="pull", backend="sim", updates=3, wall_s=6.0, utilisation=0.6, rollouts_per_s=1.0)
    s.rollouts_consumed, s.staleness_hist = 6, {1: 2, 0: 4}
    assert s.summary() == (
        "pull/sim: 3 updates in 6.00s, utilisation 60.0%, 1.0 rollouts/s, consumed 6, dropped stale 0, "
        "lost 0, refused 0, restarts 0, staleness [0:4 1:2]"
    )


def test_counters_count_each_event() -> None:
    c = Coordinator("pull", rollouts_per_update=2)
    c.requests([0, 1])
    c.worker_lost(0)
    c.worker_lost(1)
    assert c.lost == 2 and c.requests([0, 1, 2]) == [(0, 2, 0), (1, 3, 0)]  # each loss re-asks exactly one
    c.refuse(0)
    c.refuse(1)
    assert c.refused == 2 and c.generated == 2 and c.requests([0, 1]) == [(0, 4, 0), (1, 5, 0)]


def test_simulate_defaults_and_labels() -> None:
    # push_pull with the defaults: S = 0, kappa = 1 (anything else would be refused), no time limit
    stats, _ = simulate("push_pull", [SimWorker(0.3), SimWorker(0.4)], rollouts_per_update=1, updates=5)
    assert (stats.mode, stats.backend, stats.updates) == ("push_pull", "sim", 5)
    assert set(stats.staleness_hist) == {0} and stats.dropped_stale > 0


def test_simulated_rollout_durations_follow_each_workers_count() -> None:
    # pull, one worker whose k-th rollout takes k + 1 s, 1 s updates, no broadcast cost:
    # rollout 0 in 0-1, update 1-2, rollout 1 in 2-4, update 4-5, rollout 2 in 5-8, update 8-9.
    stats, _ = simulate("pull", [SimWorker(lambda k: k + 1.0)], rollouts_per_update=1, updates=3)
    assert stats.wall_s == 9.0 and stats.learner_busy_s == 3.0 and stats.rollouts_generated == 3
