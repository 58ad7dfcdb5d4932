"""Train stable-baselines3 PPO to pick the right skill for EVMQuest instructions.

`action_mode="skill"` makes the action space `Discrete(n)` over parameterised skills that parse
their arguments from the instruction; `HashedInstructionObs` turns the instruction into a Box.
PPO then learns which skill each kind of instruction needs.

Run: .venv/bin/python examples/evmquest_ppo_skills.py [--timesteps 3000] [--json]
"""

from __future__ import annotations

import argparse
import json

import gymnasium as gym
import numpy as np
from stable_baselines3 import PPO

import lynn  # noqa: F401  (registers the Lynn/* env ids)
from lynn.envs.evmquest.wrappers import HashedInstructionObs

TASKS = [
    "wbnb_deposit",
    "contract_call_simple",
    "query_current_block_number",
    "query_gas_price",
    "erc721_set_approval_for_all",
]


def success_rate(env: gym.Env, policy, episodes: int, seed: int) -> float:
    wins = 0
    for i in range(episodes):
        obs, info = env.reset(seed=seed + i)
        done = False
        while not done:
            obs, reward, terminated, truncated, info = env.step(policy(obs))
            done = terminated or truncated
        wins += bool(info.get("success"))
    return wins / episodes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timesteps", type=int, default=3000)
    parser.add_argument("--eval-episodes", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    env = HashedInstructionObs(gym.make("Lynn/EVMQuest-v0", task=TASKS, action_mode="skill"))
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=128,
        batch_size=64,
        learning_rate=3e-3,
        gamma=0.9,
        ent_coef=0.01,
        seed=0,
        verbose=0,
    )
    model.learn(total_timesteps=args.timesteps)
    rng = np.random.default_rng(0)
    ppo = success_rate(
        env, lambda o: int(model.predict(o, deterministic=True)[0]), args.eval_episodes, 10_000
    )
    rand = success_rate(env, lambda o: int(rng.integers(env.action_space.n)), args.eval_episodes, 10_000)
    env.close()
    result = {"ppo": ppo, "random": rand, "timesteps": args.timesteps}
    print(json.dumps(result) if args.json else f"success rate: PPO {ppo:.2f} vs random {rand:.2f}")


if __name__ == "__main__":
    main()
