"""Evaluate your own WebArena-format tasks (and your own agent) on Lynn/LiveWeb-v0.

    python examples/liveweb_own_tasks.py

The task file uses WebArena's fields; ``__FORUM__`` (and ``__SHOP__``, ``__ADMIN__``) are replaced by the
bundled sites' URLs. To run against your own deployment instead, pass
``sites={"forum": "http://my-host:9999"}`` to ``gym.make`` and the env only drives the browser there.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import gymnasium as gym

import lynn  # noqa: F401

TASKS = [
    {
        "sites": ["forum"],
        "task_id": "my.open_cycling",
        "require_login": False,
        "start_url": "__FORUM__/",
        "intent_template": "Open the {{forum}} forum",
        "instantiation_dict": {"forum": "cycling"},
        "intent": "Open the cycling forum",
        "eval": {"eval_types": ["url_match"], "reference_url": "__FORUM__/f/cycling"},
    },
    {
        "sites": ["forum"],
        "task_id": "my.count_cycling",
        "require_login": False,
        "start_url": "__FORUM__/f/cycling",
        "intent": "How many posts are in the cycling forum?",
        "eval": {"eval_types": ["string_match"], "reference_answers": {"must_include": ["posts"]}},
    },
]


class KeywordAgent:
    """A tiny rule-based agent: open the forum the goal names, or read the post count off the page."""

    def act(self, obs: dict) -> str:
        wanted = re.search(r"Open the (\w+) forum", obs["goal"])
        if wanted and "/f/" not in obs["url"]:
            m = re.search(rf'\[(\w+)\] link "f/{wanted.group(1)}"', obs["axtree"])
            if m:
                return f"click('{m.group(1)}')"
        m = re.search(r"(\d+ posts)", obs["axtree"])
        return f"send_msg_to_user('{m.group(1) if m and not wanted else 'done'}')"


def main() -> None:
    path = Path(tempfile.mkdtemp()) / "my_tasks.json"
    path.write_text(json.dumps(TASKS, indent=1))
    env = gym.make("Lynn/LiveWeb-v0", tasks=str(path))
    agent = KeywordAgent()
    try:
        for task in env.unwrapped.list_tasks(tasks=str(path)):
            obs, info = env.reset(options={"task_id": task["task_id"]})
            for _ in range(5):
                obs, reward, terminated, truncated, info = env.step(agent.act(obs))
                if terminated or truncated:
                    break
            print(f"{task['task_id']}: reward {reward} ({'; '.join(info.get('eval', []))})")
    finally:
        env.close()


if __name__ == "__main__":
    main()
