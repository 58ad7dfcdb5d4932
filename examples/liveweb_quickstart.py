"""Run agents on Lynn/LiveWeb-v0: a real Chromium on the bundled shop, forum and admin sites.

    python examples/liveweb_quickstart.py                 # the expert on 3 test tasks, printing each step
    python examples/liveweb_quickstart.py --episodes 1 --agent random

Each observation is a dict of texts (goal, url, title, axtree with element ids such as [f1e12], ...);
each action is one BrowserGym-style string such as ``click('f1e12')`` or ``send_msg_to_user('$12.99')``.
Replace the agent by your own (an LLM prompted with obs["goal"] and obs["axtree"]) to evaluate it.
"""

from __future__ import annotations

import argparse

import gymnasium as gym

import lynn  # noqa: F401  (registers Lynn/LiveWeb-v0)
from lynn.agents import make_agent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", default="expert", help="expert, random, or module:Class")
    ap.add_argument("--episodes", type=int, default=3)
    args = ap.parse_args()

    env = gym.make("Lynn/LiveWeb-v0", split="test")
    agent = make_agent(args.agent, env)
    wins = 0
    try:
        for episode in range(args.episodes):
            obs, info = env.reset(seed=episode)
            agent.reset(seed=episode)
            print(f"\n[{info['task_id']}] {obs['goal']}")
            while True:
                action = agent.act(obs, info)
                obs, reward, terminated, truncated, info = env.step(action)
                print(
                    f"  {action[:70]:70} -> {obs['title'][:40]!r}"
                    + (f"  error: {info['error'][:60]}" if info["error"] else "")
                )
                if terminated or truncated:
                    break
            wins += reward > 0
            print(f"  reward {reward}  ({'; '.join(info.get('eval', []))})")
    finally:
        env.close()
    print(f"\n{args.agent}: {wins}/{args.episodes} tasks solved")


if __name__ == "__main__":
    main()
