"""``lynn train dynaweb`` end to end on the session's real fixtures (page-memory world model and reward
model from real LiveWeb expert runs, a tiny BC policy): the interleaving ratio, a run killed mid-way
and resumed to the same final step and weights, the real-browser validation, and the trained policy
through ``--agent dynaweb``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

from lynn.agents.dynaweb.expert import ExpertBank, expert_count  # noqa: E402
from tests.conftest import REPO, run_lynn  # noqa: E402


def test_expert_count_matches_the_ratio():
    for imagined in (2, 8, 16, 40):
        for ratio in (0.0, 0.25, 0.5, 0.75):
            n = expert_count(imagined, ratio)
            assert abs(n / (n + imagined) - ratio) <= 0.5 / (n + imagined) + 1e-9
    assert expert_count(16, 0.5) == 16  # the paper's "half of a batch"
    assert expert_count(16, 0.0) == 0
    with pytest.raises(ValueError):
        expert_count(16, 1.0)


def test_expert_bank_reads_train_successes_only(web_data, web_policy):
    from transformers import AutoTokenizer

    from lynn.lm.tokenizer import encode_chat

    bank = ExpertBank.load(web_data["train"])
    assert len(bank) == 9 and all(t.endswith((".0", ".1", ".2")) for t in bank.task_ids)
    with pytest.raises(ValueError, match="held-out"):
        ExpertBank.load(web_data["test"])  # held-out instances never become expert rows
    tok = AutoTokenizer.from_pretrained(web_policy)
    traj = bank.encode(0, tok, context=512, reply_budget=24)
    assert traj.source == "expert" and traj.success
    for step, (msgs, action) in zip(traj.steps, bank.episodes[0], strict=True):
        assert len(step.prompt_ids) <= 512 - 24  # the page is cut as LMPolicy cuts it
        assert step.completion_ids[-1] == tok.eos_token_id
        assert tok.decode(step.completion_ids, skip_special_tokens=True) == action
        full = encode_chat(tok, msgs)
        cut = len(full) > len(step.prompt_ids)  # a long page is cut to its first lines, never its goal
        assert step.prompt_ids[:12] == full[:12] and (cut or step.prompt_ids == full)


def test_batches_interleave_expert_trajectories_at_the_ratio(run_cfg):
    from lynn.agents.dynaweb.train import train_dynaweb

    s = train_dynaweb(run_cfg(expert_ratio=0.5, group_size=2, updates=3))
    for h in s["history"]:
        assert h["expert_trajectories"] == 2  # as many as the G = 2 imagined rollouts: half the batch
        assert h["expert_trajectories"] / (h["expert_trajectories"] + 2) == 0.5
        assert h["expert_rows"] == h["rows"] - h["rollout_steps"] > 0
        assert all(t.endswith((".0", ".1", ".2")) for t in h["expert_tasks"])  # train instances
    draws = [tuple(h["expert_tasks"]) for h in s["history"]]
    assert len(set(draws)) > 1  # drawn at random per update, not a fixed pair
    assert s["real_interactions"]["world_model_transitions"] > 0
    assert s["real_interactions"]["live_rollout_steps"] == 0  # imagination: no real env step
    s0 = train_dynaweb(run_cfg(expert_ratio=0.0, out=str(Path(s["config"]["out"]).parent / "no-expert")))
    assert all(h["expert_trajectories"] == 0 == h["expert_rows"] for h in s0["history"])
    assert Path(s["curve"]).stat().st_size > 0
    assert json.loads((Path(s["config"]["out"]) / "summary.json").read_text())["updates"] == 3
    # The ablation: the same expert draws, no rollouts, the expert rows alone (BC continued).
    root = Path(s["config"]["out"]).parent
    se = train_dynaweb(
        run_cfg(expert_ratio=0.5, group_size=2, updates=3, expert_only=True, out=str(root / "bc"))
    )
    assert [h["expert_tasks"] for h in se["history"]] == [h["expert_tasks"] for h in s["history"]]
    assert all(h["rollout_steps"] == 0 and h["rows"] == h["expert_rows"] > 0 for h in se["history"])
    assert se["final_rollout_reward"] is None and se["counts"]["rollout_steps"] == 0
    start, trained = _weights(Path(se["config"]["policy"])), _weights(Path(se["final"]))
    assert any(not start[k].equal(trained[k]) for k in start)  # the expert rows trained it
    with pytest.raises(ValueError, match="expert_only needs expert_ratio"):
        run_cfg(expert_ratio=0.0, expert_only=True)


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_killed_run_resumes_to_the_same_step_and_weights(run_cfg, tmp_path):
    import torch

    from lynn.agents.dynaweb.train import latest_checkpoint, train_dynaweb

    updates = 4
    full = train_dynaweb(run_cfg(out=str(tmp_path / "full"), updates=updates))
    cfg = run_cfg(out=str(tmp_path / "killed"), updates=updates)
    args = [
        "train", "dynaweb", "--policy", cfg.policy, "--out", cfg.out, "--world-model", cfg.world_model,
        "--expert-data", cfg.expert_data, "--updates", str(updates), "--groups-per-update", "1",
        "--group-size", "2", "--horizon", "2", "--max-new-tokens", "24", "--eval-every", "0",
        "--checkpoint-every", "1", "--no-progress",
    ]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "lynn.cli", *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while latest_checkpoint(cfg.out) is None or int(latest_checkpoint(cfg.out).name.split("-")[1]) < 2:
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # mid-way: no clean shutdown, no final/
        proc.wait()
    reached = int(latest_checkpoint(cfg.out).name.split("-")[1])
    assert 2 <= reached < updates and not (Path(cfg.out) / "final").exists()
    with pytest.raises(ValueError, match="--resume"):
        train_dynaweb(cfg)  # a run folder with checkpoints is never silently overwritten
    cfg.resume = True
    resumed = train_dynaweb(cfg)
    assert resumed["updates"] == full["updates"] == updates
    assert [h["update"] for h in resumed["history"]] == list(range(1, updates + 1))
    assert [h["rollout_reward"] for h in resumed["history"]] == [h["rollout_reward"] for h in full["history"]]
    a, b = _weights(Path(full["final"])), _weights(Path(resumed["final"]))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    start = _weights(Path(cfg.policy))
    assert any(not torch.equal(a[k], start[k]) for k in a)  # training moved the weights


@pytest.mark.slow  # real browsers: two validations in training plus a `lynn eval` subprocess
def test_real_validation_and_the_dynaweb_agent_on_liveweb(run_cfg, tmp_path):
    from lynn.agents.dynaweb.train import train_dynaweb

    s = train_dynaweb(run_cfg(updates=1, eval_every=1, eval_tasks=1, eval_max_steps=2, real_envs=1))
    assert [e["update"] for e in s["evals"]] == [0, 1]  # the BC start and after the update
    assert all(e["episodes"] == 1 and 1 <= e["steps"] <= 2 for e in s["evals"])
    assert s["real_interactions"]["validation_steps"] == sum(e["steps"] for e in s["evals"])
    r = run_lynn(
        "eval", "Lynn/LiveWeb-v0", "--agent", "dynaweb", "--agent-arg", f'model="{s["config"]["out"]}"',
        "--split", "test", "--tasks", "shop.product_price.3", "--max-steps", "2",
        "--out", str(tmp_path / "eval"), "--json", "--no-progress",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])["episodes"] == 1


@pytest.fixture
def ranked_policy(web_policy: Path, web_data: dict, tmp_path: Path) -> Path:
    """The tiny BC policy as a ranked-format policy: its format (``lynn_web.json``) and action memory fitted
    on the session's train transitions, as ``python -m lynn.lm.web_candidates`` / ``web_memory`` write them."""
    import dataclasses
    import shutil

    from lynn.lm.web_candidates import learn_format, load_steps
    from lynn.lm.web_memory import MEMORY_FILE, ActionMemory

    out = tmp_path / "ranked"
    shutil.copytree(web_policy, out)
    steps = load_steps([str(web_data["train"])])
    fmt = dataclasses.replace(learn_format(steps, k=20), slots=True, memory_weight=0.5)
    (out / "lynn_web.json").write_text(json.dumps(dataclasses.asdict(fmt)))
    ActionMemory.build(steps, min_episodes=1).save(out / MEMORY_FILE)
    return out


def test_a_ranked_policy_trains_on_the_replies_its_chooser_scores(run_cfg, ranked_policy, web_data):
    """zoo:web-lm's kind of policy (candidates ranked by the LM, mixed with an action memory): rollouts sample
    the chooser's candidates, expert rows are rendered as it reads pages, and final/ keeps its format and memory."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lynn.agents.dynaweb.train import train_dynaweb
    from lynn.lm.web_candidates import RankedChooser, load_steps

    bank = ExpertBank.load(web_data["train"], policy=str(ranked_policy))
    assert bank.ranked and len(bank) == 9
    tok = AutoTokenizer.from_pretrained(ranked_policy)
    chooser = RankedChooser.from_folder(
        AutoModelForCausalLM.from_pretrained(ranked_policy), tok, ranked_policy
    )
    first = [st for st in load_steps([str(web_data["train"])]) if st["task_id"] == bank.task_ids[0]]
    traj = bank.encode(0, tok, context=512, reply_budget=24)
    for st, step, (msgs, reply) in zip(first, traj.steps, bank.episodes[0], strict=True):
        assert chooser.decide(st["obs"], st["replies"]).messages == msgs  # the page as the policy reads it
        assert tok.decode(step.completion_ids, skip_special_tokens=True) == reply
    s = train_dynaweb(
        run_cfg(policy=str(ranked_policy), expert_ratio=0.5, updates=2, group_size=3, horizon=3)
    )
    assert all(h["rollout_parse_errors"] == 0 for h in s["history"])  # every action a page candidate
    assert all(h["expert_rows"] > 0 for h in s["history"])
    final = Path(s["final"])
    for name in ("lynn_web.json", "lynn_memory.json.gz", "model.safetensors"):
        assert (final / name).exists()
    w0, w1 = _weights(ranked_policy), _weights(final)
    assert any(not torch.equal(w0[k], w1[k]) for k in w0)  # the LM's weights were trained


def test_goals_added_with_starts_are_imagined_and_scored_by_their_checks(
    run_cfg, memory_model, web_data, tmp_path
):
    """``starts`` + ``task_file``: a salted train goal with no expert episode is sampled and imagined beside
    the world model's own; the expert rows still come from the recorded train episodes; with
    ``reward_source="checks"`` its answer is scored by its own check. Both options belong to imagination."""
    from lynn.agents.dynaweb.train import train_dynaweb
    from lynn.envs.liveweb.tasks import load_tasks
    from lynn.envs.worldmodel.worldmodel_env import _read_starts

    bank = {t["task_id"]: t for t in load_tasks(None)}
    base = "shop.product_price.0"
    salted = {**bank[base], "task_id": f"{base}@x", "split": "train"}
    (tmp_path / "tasks.json").write_text(json.dumps([salted]))
    start = next(s for s in _read_starts(web_data["train"]) if s["task_id"] == base)
    (tmp_path / "starts.jsonl").write_text(json.dumps({**start, "task_id": salted["task_id"]}) + "\n")
    cfg = run_cfg(
        starts=[str(tmp_path / "starts.jsonl")],
        task_file=str(tmp_path / "tasks.json"),
        reward_source="checks",
        reward_mode="prob",  # the reward model would give a probability; the check gives 0 or 1
        tasks=[salted["task_id"]],
        expert_ratio=0.5,
        updates=2,
    )
    s = train_dynaweb(cfg)
    assert all(h["tasks"] == [salted["task_id"]] for h in s["history"])
    assert s["real_interactions"]["start_page_steps"] == 1  # the added start page counts as real
    assert all(h["expert_rows"] > 0 and "@" not in t for h in s["history"] for t in h["expert_tasks"])
    assert all(r in (0.0, 1.0) for h in s["history"] for g in h["group_rewards"] for r in g)
    with pytest.raises(ValueError, match="options of imagination"):
        run_cfg(env="Lynn/LiveWeb-v0", starts=[str(tmp_path / "starts.jsonl")])


def test_answer_temperature_redraws_which_answer_and_nothing_else(run_cfg, ranked_policy, web_data):
    """``answer_temperature``: a sampled step that is an answer is redrawn among the page's answers (near 0: the
    best-scored answer every time; high: several of them); greedy steps and ``0`` are untouched."""
    import random

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lynn.agents.dynaweb.train import train_dynaweb
    from lynn.lm.web_candidates import RankedChooser, load_steps

    chooser = RankedChooser.from_folder(
        AutoModelForCausalLM.from_pretrained(ranked_policy),
        AutoTokenizer.from_pretrained(ranked_policy),
        ranked_policy,
    )
    st = next(s for s in load_steps([str(web_data["train"])]) if s["action"].startswith("send_msg_to_user"))

    def answers(at: float, temperature: float = 1.0) -> list[str]:
        chooser.answer_temperature = at
        rng = random.Random(0)
        replies = [chooser.decide(st["obs"], st["replies"], temperature, rng).reply for _ in range(40)]
        return [r for r in replies if r.startswith("answer ")]

    cold, hot = answers(1e-3), answers(1e3)
    assert cold and hot
    assert len(set(cold)) == 1  # the best-scored answer, whatever answer was drawn first
    assert len(set(hot)) > 1  # several of the page's answers
    assert answers(1e3, temperature=0.0) == answers(0.0, temperature=0.0)  # greedy: untouched
    s = train_dynaweb(run_cfg(policy=str(ranked_policy), answer_temperature=2.0, updates=1, group_size=2))
    assert s["updates"] == 1 and all(h["rollout_parse_errors"] == 0 for h in s["history"])
    with pytest.raises(ValueError, match="ranked-format"):
        train_dynaweb(run_cfg(answer_temperature=2.0, out=str(Path(s["config"]["out"]).parent / "plain")))
    with pytest.raises(ValueError, match="answer_temperature"):
        run_cfg(answer_temperature=-1.0)
