"""The Ray backend: one Ray session for the whole module (start-up costs seconds)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from lynn.eval.runner import EvalConfig, evaluate, run_dir  # noqa: E402
from lynn.wrappers.echo.actor_learner import ActorLearner  # noqa: E402
from lynn.wrappers.echo.broadcast import RayBroadcast, simulate_broadcast  # noqa: E402
from tests._shared import one_ray_cluster_at_a_time  # noqa: E402, F401  (autouse: this module starts Ray)
from tests.conftest import GUESS, REPO, run_lynn  # noqa: E402
from tests.wrappers.echo._echo_envs import VersionLearner, make_sleep_worker  # noqa: E402
from tests.wrappers.echo.test_echo_actor_learner import check_run  # noqa: E402


@pytest.fixture(scope="module")
def ray_session(tmp_path_factory):
    os.environ["RAY_AUTH_MODE"] = "disabled"
    temp = tmp_path_factory.mktemp("ray")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _temp_dir=str(temp),
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO), "RAY_AUTH_MODE": "disabled"}},
    )
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def test_pull_mode_on_ray_is_on_policy(ray_session) -> None:
    learner = VersionLearner(train_s=0.01)
    al = ActorLearner(
        make_sleep_worker, learner, mode="pull", num_workers=2, rollouts_per_update=3, backend="ray"
    )
    try:
        stats = al.run(updates=6)
    finally:
        al.close()
    check_run(al, learner, stats, 6, staleness=0)
    assert all(step == used for step, used in learner.seen)
    assert stats.backend == "ray" and stats.dropped_stale == 0
    assert ray.is_initialized()  # it joined the running session and left it running


def test_push_pull_on_ray_survives_a_killed_actor(ray_session) -> None:
    learner = VersionLearner(train_s=0.02)
    al = ActorLearner(
        make_sleep_worker,
        learner,
        mode="push_pull",
        num_workers=3,
        rollouts_per_update=3,
        staleness=2,
        kappa=2,
        backend="ray",
    )
    learner.on_update = lambda step: al.kill_worker(0) if step == 4 else None
    try:
        stats = al.run(updates=20)
    finally:
        al.close()
    check_run(al, learner, stats, 20, staleness=2)
    assert stats.worker_restarts == 1
    assert stats.lost <= 1 and len(al.loss_reports) == stats.lost


def _records(cfg: EvalConfig) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir(cfg) / "episodes.jsonl").read_text().splitlines()]
    for r in rows:
        r.pop("timings")
    return sorted(rows, key=lambda r: r["episode"])


def test_eval_backend_ray_writes_the_same_records_as_local_workers(ray_session, tmp_path: Path) -> None:
    import tests._envs  # noqa: F401

    common = dict(env_id=GUESS, agent="random", episodes=6, seed=3, progress=False)
    local = EvalConfig(**common, workers=2, out=str(tmp_path / "local"))
    remote = EvalConfig(**common, workers=2, out=str(tmp_path / "ray"), backend="ray")
    s_local, s_ray = evaluate(local), evaluate(remote)
    assert _records(local) == _records(remote)
    assert s_local["mean_reward"] == s_ray["mean_reward"]
    assert ray.is_initialized()


def test_cli_eval_joins_an_existing_cluster_by_address(ray_session, tmp_path: Path) -> None:
    out = tmp_path / "cli"
    proc = run_lynn(
        "eval",
        GUESS,
        "--episodes",
        "3",
        "--workers",
        "2",
        "--backend",
        "ray",
        "--address",
        ray_session,
        "--out",
        str(out),
        "--json",
        "--no-progress",
        extra_env={"RAY_AUTH_MODE": "disabled"},
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["episodes"] == 3
    bad = run_lynn("eval", GUESS, "--address", "1.2.3.4:1", "--out", str(out))
    assert bad.returncode == 2 and "--backend ray" in bad.stderr


@pytest.mark.parametrize("strategy", ["one_to_many", "chain"])
def test_broadcast_delivers_identical_weights_to_every_worker(ray_session, strategy: str) -> None:
    payload = os.urandom(200_000)
    bandwidth, chunk = 4e6, 25_000
    seconds, digests = RayBroadcast(2, bandwidth=bandwidth, chunk_bytes=chunk).run(strategy, payload)
    assert digests == [hashlib.sha256(payload).hexdigest()] * 2
    # Pacing is real: nobody can have the model before the bandwidth model's lower bound.
    assert seconds >= 0.9 * simulate_broadcast(strategy, 2, len(payload), bandwidth, chunk)


@pytest.mark.slow
def test_actor_learner_example_on_ray(ray_session, capsys) -> None:
    pytest.importorskip("torch")
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "echo_example_ray", REPO / "examples" / "echo_actor_learner.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # push_pull only: pull on Ray is covered above, and each mode costs fresh torch-importing actors.
    argv = [
        "--backend",
        "ray",
        "--modes",
        "push_pull",
        "--updates",
        "3",
        "--rollouts",
        "2",
        "--step-latency",
        "0",
    ]
    (result,) = module.main([*argv, "--target", "1"])
    assert result["stats"].backend == "ray" and result["stats"].rollouts_consumed == 6
    assert result["seconds_to_target"] is not None
    assert "push_pull" in capsys.readouterr().out
