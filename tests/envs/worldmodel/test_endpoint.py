"""The endpoint backend of the world model against a real OpenAI-compatible server: ``transformers serve``
of the tiny LM world model (:class:`lynn.lm.serve.ModelServer`, the same server the ``lynn.lm`` backend
tests start). Served greedy Δs equal the in-process ones, and the env steps over the endpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from lynn.envs.worldmodel.data import read_transitions

pytestmark = pytest.mark.slow


def test_served_world_model_writes_the_in_process_deltas_and_the_env_steps_over_it(
    tiny_world_model: Path, memory_model: Path, web_data: dict[str, Path]
) -> None:
    import gymnasium as gym

    import lynn  # noqa: F401
    from lynn.envs.worldmodel.model import LMWorldModel, load_world_model
    from lynn.lm.backends import OpenAIGenerator
    from lynn.lm.serve import ModelServer

    rows = read_transitions(web_data["test"])[:4]
    items = [(r["goal"], r["obs"], r["action"]) for r in rows]
    local = load_world_model(tiny_world_model, page_memory=False, speculative=None, threads=1)
    want = local.predict(items)
    with ModelServer(tiny_world_model / "lm") as server:
        remote = load_world_model(tiny_world_model, llm_url=server.base_url, page_memory=False)
        assert isinstance(remote, LMWorldModel) and isinstance(remote.generator, OpenAIGenerator)
        assert (remote.context, remote.max_new_tokens) == (local.context, local.max_new_tokens)
        assert remote.prompts(items) == local.prompts(items)  # same retrieval and the same cut
        got = remote.predict(items)
        assert got == want
        assert all(s["completion_tokens"] > 0 for s in remote.last_stats)
        env = gym.make(
            "Lynn/WebWorldModel-v0",
            model=str(tiny_world_model),
            llm_url=server.base_url,
            reward_model=str(memory_model),
            split="test",
            max_steps=2,
        )
        try:
            obs, info = env.reset(options={"task_id": rows[0]["task_id"]})
            assert obs["axtree"] == rows[0]["obs"]["axtree"]
            obs, reward, terminated, truncated, info = env.step(rows[0]["action"])
            assert env.observation_space.contains(obs) and not terminated
            assert info["timings"]["model_s"] > 0
            obs, reward, terminated, truncated, info = env.step("send_msg_to_user('done')")
            assert terminated and 0.0 <= info["score"] <= 1.0
        finally:
            env.close()
