"""Train Stable-Baselines3 PPO to route subtasks on Lynn/Coordination-v0 and compare it with random.

    python examples/train_sb3_coordination.py --timesteps 20000
    python examples/train_sb3_coordination.py --timesteps 3000 --eval-steps 300 --json   # tiny budget

The observation is a Dict of Boxes, so PPO's ``MultiInputPolicy`` takes it as is. PPO learns which
worker to send each subtask type to from the reward alone; random routing (which respects the
``action_mask``) is the floor.
"""

from __future__ import annotations

import argparse
import json

import gymnasium as gym
import torch
from stable_baselines3 import PPO

import lynn  # noqa: F401  (registers Lynn/Coordination-v0)
from lynn.agents import make_agent


def evaluate(env_id: str, policy, episodes: int, steps: int, seed: int, **env_kwargs) -> float:
    """Mean success per routed subtask of ``policy(obs, info) -> action`` over seeded episodes."""
    env = gym.make(env_id, max_episode_steps=steps, **env_kwargs)
    total, count = 0.0, 0
    for episode in range(episodes):
        obs, info = env.reset(seed=seed + episode)
        done = False
        while not done:
            obs, reward, terminated, truncated, info = env.step(policy(obs, info))
            total += reward
            count += 1
            done = terminated or truncated
    env.close()
    return total / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="stationary")
    parser.add_argument("--timesteps", type=int, default=20_000, help="PPO training steps")
    parser.add_argument("--n-steps", type=int, default=256, help="PPO rollout length")
    parser.add_argument("--eval-episodes", type=int, default=3)
    parser.add_argument("--eval-steps", type=int, default=500, help="steps per evaluation episode")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", help="save the trained model here (.zip)")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON line")
    args = parser.parse_args()

    torch.set_num_threads(1)  # a tiny MLP: more threads only add synchronisation overhead
    env_id = "Lynn/Coordination-v0"
    train_env = gym.make(env_id, scenario=args.scenario)
    model = PPO(
        "MultiInputPolicy",
        train_env,
        n_steps=args.n_steps,
        batch_size=64,
        learning_rate=1e-3,
        ent_coef=0.01,
        seed=args.seed,
        device="cpu",
        verbose=0,
    )
    model.learn(total_timesteps=args.timesteps)
    if args.save:
        model.save(args.save)

    def ppo_policy(obs, info):
        action, _ = model.predict(obs, deterministic=True)
        return int(action)

    random_agent = make_agent("random", gym.make(env_id, scenario=args.scenario))
    random_agent.reset(seed=args.seed)
    eval_seed = 10_000 + args.seed  # evaluation streams differ from the training ones
    results = {
        "scenario": args.scenario,
        "timesteps": args.timesteps,
        "ppo": evaluate(
            env_id, ppo_policy, args.eval_episodes, args.eval_steps, eval_seed, scenario=args.scenario
        ),
        "random": evaluate(
            env_id, random_agent.act, args.eval_episodes, args.eval_steps, eval_seed, scenario=args.scenario
        ),
    }
    if args.json:
        print(json.dumps(results))
    else:
        print(
            f"{env_id} ({args.scenario}), PPO after {args.timesteps} steps: success per subtask "
            f"{results['ppo']:.3f} vs random {results['random']:.3f}"
        )


if __name__ == "__main__":
    main()
