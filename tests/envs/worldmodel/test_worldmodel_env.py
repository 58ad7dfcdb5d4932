"""``Lynn/WebWorldModel-v0``: make-time errors, LiveWeb's spaces and parser, check_env, bad model output,
batched stepping, episode end and reward, and an LM world model trained in seconds stepping the env."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import lynn  # noqa: F401
from lynn.envs.worldmodel.worldmodel_env import WebWorldModelEnv
from tests.envs.worldmodel.conftest import TEST_IDS

ENV_ID = "Lynn/WebWorldModel-v0"
# These tests record real LiveWeb episodes (a session fixture: minutes on a loaded machine).
pytestmark = pytest.mark.slow


def test_spaces_are_liveweb_text_spaces(memory_model: Path) -> None:
    from lynn.envs.liveweb.liveweb_env import LiveWebEnv

    live = LiveWebEnv()  # builds spaces only; no browser starts before reset
    env = gym.make(ENV_ID, model=str(memory_model))
    try:
        assert env.observation_space == live.observation_space
        assert env.action_space == live.action_space
    finally:
        env.close()
        live.close()


def test_check_env(memory_model: Path) -> None:
    env = gym.make(ENV_ID, model=str(memory_model), reward_model=str(memory_model), disable_env_checker=True)
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


def test_reset_is_the_recorded_start_page(memory_model: Path, web_data) -> None:
    from lynn.envs.worldmodel.data import read_transitions

    first = {r["task_id"]: r["obs"] for r in read_transitions(web_data["test"]) if r["step"] == 0}
    env = gym.make(ENV_ID, model=str(memory_model), split="test")
    obs, info = env.reset(options={"task_id": TEST_IDS[0]})
    assert info["task_id"] == TEST_IDS[0]
    assert obs["axtree"] == first[TEST_IDS[0]]["axtree"] and obs["url"] == first[TEST_IDS[0]]["url"]
    assert {t["task_id"] for t in env.unwrapped.starts} == set(TEST_IDS)
    with pytest.raises(ValueError, match="unknown task_id"):
        env.reset(options={"task_id": "shop.product_price.0"})  # a train instance, not in split test


def test_unparsable_action_gives_liveweb_error_and_keeps_page(memory_model: Path) -> None:
    from lynn.envs.liveweb.actions import ActionError, parse_actions

    env = gym.make(ENV_ID, model=str(memory_model))
    obs, _ = env.reset(seed=0)
    with pytest.raises(ActionError) as exc:
        parse_actions("click(((")
    obs2, reward, terminated, truncated, info = env.step("click(((")
    assert info["error"] == str(exc.value) == obs2["last_action_error"]
    assert reward == 0 and not terminated and obs2["axtree"] == obs["axtree"]


def test_bad_model_output_falls_back_with_info_error(tiny_world_model: Path, memory_model: Path) -> None:
    # An LM trained for a few seconds writes no valid Δ: the env keeps the page and says why.
    env = gym.make(
        ENV_ID, model=str(tiny_world_model), starts=str(memory_model / "starts.jsonl"), page_memory=False
    )
    obs, _ = env.reset(options={"task_id": TEST_IDS[0]})
    obs2, reward, terminated, truncated, info = env.step("click('e5')")
    assert info["error"] and ("not a valid Δ" in info["error"] or "does not apply" in info["error"])
    if "not a valid Δ" in info["error"]:
        assert obs2["axtree"] == obs["axtree"]
    assert obs2["last_action"] == "click('e5')" and obs2["last_action_error"] == ""
    assert env.observation_space.contains(obs2)


def test_tiny_lm_world_model_steps_the_env_batched(tiny_world_model: Path, memory_model: Path) -> None:
    starts = str(memory_model / "starts.jsonl")
    envs = [WebWorldModelEnv(model=tiny_world_model, starts=starts, max_steps=3) for _ in range(1)]
    shared = envs[0].world_model
    envs += [WebWorldModelEnv(world_model=shared, starts=starts, max_steps=3) for _ in range(2)]
    for i, e in enumerate(envs):
        e.reset(options={"task_id": TEST_IDS[i]})
    out = WebWorldModelEnv.step_batch(envs, ["click('e5')", "fill('e16', 'kettle')", "go_back()"])
    assert len(out) == 3
    for e, (obs, reward, terminated, _truncated, info) in zip(envs, out, strict=True):
        assert e.observation_space.contains(obs) and reward == 0 and not terminated
        assert info["timings"]["model_s"] > 0
    assert len(shared.last_stats) == 3  # one generation call served the three envs


def test_episode_ends_on_answer_with_reward_model_score_and_truncates(memory_model: Path, web_data) -> None:
    from lynn.envs.worldmodel.data import episodes, read_transitions

    ep = next(e for e in episodes(read_transitions(web_data["test"])) if e[0]["task_id"] == TEST_IDS[0])
    env = gym.make(ENV_ID, model=str(memory_model), reward_model=str(memory_model), reward_mode="prob")
    env.reset(options={"task_id": TEST_IDS[0]})
    for r in ep:
        obs, reward, terminated, truncated, info = env.step(r["action"])
    assert terminated and not truncated and 0.0 <= reward <= 1.0 and info["score"] == reward
    _, _, _, _, info = env.step("noop()")
    assert "ended" in info["error"]
    env = gym.make(ENV_ID, model=str(memory_model), max_steps=2)  # no reward model: reward 0, said so
    env.reset(seed=0)
    env.step("noop()")
    _, reward, terminated, truncated, info = env.step("noop()")
    assert truncated and not terminated and reward == 0 and "no reward_model" in info["reward_note"]


def test_step_batch_equals_single_steps(memory_model: Path, web_data) -> None:
    from lynn.envs.worldmodel.data import episodes, read_transitions

    eps = [e for e in episodes(read_transitions(web_data["test"]))][:4]
    single, batched = [], [WebWorldModelEnv(model=memory_model) for _ in eps]
    env = WebWorldModelEnv(model=memory_model)
    for ep, b in zip(eps, batched, strict=True):
        env.reset(options={"task_id": ep[0]["task_id"]})
        single.append([env.step(r["action"])[0] for r in ep])
        b.reset(options={"task_id": ep[0]["task_id"]})
    for step in range(max(len(e) for e in eps)):
        live = [(i, ep[step]["action"]) for i, ep in enumerate(eps) if step < len(ep)]
        outs = WebWorldModelEnv.step_batch([batched[i] for i, _ in live], [a for _, a in live])
        for (i, _), (obs, *_rest) in zip(live, outs, strict=True):
            assert obs == single[i][step]


def test_cli_trains_a_world_model_the_env_loads(web_data, tmp_path: Path) -> None:
    from tests.conftest import run_lynn

    out = tmp_path / "wm"
    proc = run_lynn(
        "train", "world-model", "--data", str(web_data["train"]), str(web_data["test"]),
        "--out", str(out), "--kind", "memory", "--reward", "--no-progress",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert '"kind": "memory"' in proc.stdout and '"accuracy"' in proc.stdout
    env = gym.make(ENV_ID, model=str(out), reward_model=str(out), split="test")
    obs, info = env.reset(seed=0)
    assert info["task_id"] in TEST_IDS and obs["axtree"]


def test_self_assessment_asks_the_world_models_lm(tiny_world_model: Path, memory_model: Path) -> None:
    env = gym.make(
        ENV_ID, model=str(tiny_world_model), starts=str(memory_model / "starts.jsonl"), self_assess=True
    )
    env.reset(options={"task_id": TEST_IDS[0]})
    _, reward, terminated, _, info = env.step("send_msg_to_user('$10.00')")
    assert terminated and reward in (0.0, 1.0) and info["score"] in (0.0, 1.0)
    with pytest.raises(ValueError, match="self_assess"):
        gym.make(ENV_ID, model=str(memory_model), self_assess=True)  # no LM to ask


def test_reward_source_checks_scores_answers_by_the_tasks_own_check(
    memory_model: Path, web_data, tmp_path
) -> None:
    """``reward_source="checks"``: a string_match instance is scored by LiveWeb's evaluator on the imagined
    answer (right 1, wrong 0), a db_check one still by the reward model; ``tasks`` and a list of ``starts``
    bring in a salted instance with its own reference answer."""
    import json

    from lynn.envs.liveweb.tasks import load_tasks
    from lynn.envs.worldmodel.data import episodes, read_transitions
    from lynn.envs.worldmodel.worldmodel_env import _read_starts

    bank = {t["task_id"]: t for t in load_tasks(None)}
    price_id = next(t for t in TEST_IDS if t.startswith("shop.product_price"))
    right = bank[price_id]["eval"]["reference_answers"]["exact_match"]
    kw = dict(model=str(memory_model), reward_model=str(memory_model), reward_mode="prob")
    checks = WebWorldModelEnv(reward_source="checks", **kw)
    for answer, want in ((right, 1.0), ("$0.01", 0.0)):
        checks.reset(options={"task_id": price_id})
        _, reward, terminated, _, info = checks.step(f'send_msg_to_user("{answer}")')
        assert terminated and reward == want and info["score"] == want

    set_price = next(t for t in TEST_IDS if t.startswith("admin.set_price"))  # db_check: the model scores it
    ep = next(e for e in episodes(read_transitions(web_data["test"])) if e[0]["task_id"] == set_price)
    model = WebWorldModelEnv(**kw)
    scores = []
    for env in (checks, model):
        env.reset(options={"task_id": set_price})
        for r in ep:
            *_, info = env.step(r["action"])
        scores.append(info["score"])
    assert scores[0] == scores[1] and 0.0 <= scores[0] <= 1.0

    salted = {**bank[price_id], "task_id": f"{price_id}@x", "split": "test"}
    salted["eval"] = {"eval_types": ["string_match"], "reference_answers": {"exact_match": "$1.23"}}
    (tmp_path / "tasks.json").write_text(json.dumps([salted]))
    start = next(s for s in _read_starts(web_data["test"]) if s["task_id"] == price_id)
    (tmp_path / "starts.jsonl").write_text(json.dumps({**start, "task_id": salted["task_id"]}) + "\n")
    own = memory_model / "starts.jsonl"
    env = WebWorldModelEnv(
        starts=[own, tmp_path / "starts.jsonl"], tasks=tmp_path / "tasks.json", reward_source="checks", **kw
    )
    assert {price_id, salted["task_id"]} <= set(env.by_id)
    for answer, want in ((right, 0.0), ("$1.23", 1.0)):
        env.reset(options={"task_id": salted["task_id"]})
        _, reward, *_ = env.step(f'send_msg_to_user("{answer}")')
        assert reward == want
    with pytest.raises(ValueError, match="reward_source"):
        WebWorldModelEnv(reward_source="oracle", **kw)
