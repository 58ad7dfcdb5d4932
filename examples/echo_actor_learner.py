"""Train a small PyTorch policy on CartPole through Echo's actor-learner, in `pull` and `push_pull` mode.

Rollout workers (separate processes) play episodes with their copy of the policy; the learner does
one clipped policy-gradient step per batch of R episodes. Each env step waits `--step-latency`
seconds, standing in for a slow env (a browser step, a chain transaction): that is where
`push_pull` wins, because the learner trains while workers keep generating instead of waiting.

    python examples/echo_actor_learner.py --updates 60 --target 150
    python examples/echo_actor_learner.py --backend ray --updates 60

Prints, per mode: wall seconds to reach the target return, the final return, learner utilisation.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from lynn.wrappers.echo.actor_learner import ActorLearner


def make_policy() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2))


class SlowCartPole(gym.Wrapper):
    """CartPole whose every step takes ``latency`` seconds (a stand-in for a slow real env)."""

    def __init__(self, latency: float) -> None:
        super().__init__(gym.make("CartPole-v1", max_episode_steps=200))
        self.latency = latency

    def step(self, action: Any) -> Any:
        time.sleep(self.latency)
        return self.env.step(action)


class CartPoleWorker:
    """Plays one episode per rollout with its (versioned) copy of the policy."""

    def __init__(self, index: int, latency: float) -> None:
        torch.set_num_threads(1)
        self.env = SlowCartPole(latency)
        self.policy = make_policy()

    def set_weights(self, weights: dict[str, torch.Tensor]) -> None:
        self.policy.load_state_dict(weights)

    @torch.no_grad()
    def rollout(self, seed: int) -> dict[str, np.ndarray]:
        obs, _ = self.env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        observations, actions, logps, rewards = [], [], [], []
        done = False
        while not done:
            logits = self.policy(torch.as_tensor(obs, dtype=torch.float32))
            probs = torch.softmax(logits, -1).numpy()
            action = int(rng.choice(2, p=probs))
            observations.append(obs)
            actions.append(action)
            logps.append(float(np.log(probs[action] + 1e-8)))
            obs, reward, terminated, truncated, _ = self.env.step(action)
            rewards.append(float(reward))
            done = terminated or truncated
        return {
            "obs": np.asarray(observations, np.float32),
            "actions": np.asarray(actions, np.int64),
            "logp": np.asarray(logps, np.float32),
            "rewards": np.asarray(rewards, np.float32),
        }


class WorkerFactory:
    """Picklable ``make_worker``: builds a worker inside each worker process."""

    def __init__(self, latency: float) -> None:
        self.latency = latency

    def __call__(self, index: int) -> CartPoleWorker:
        return CartPoleWorker(index, self.latency)


class PolicyGradientLearner:
    """Clipped policy gradient (PPO-style ratio clip, one step per batch): tolerant of stale rollouts."""

    def __init__(self, lr: float = 0.01, gamma: float = 0.99, seed: int = 0) -> None:
        torch.manual_seed(seed)
        self.policy = make_policy()
        self.opt = torch.optim.Adam(self.policy.parameters(), lr=lr)
        self.gamma = gamma
        self.returns: list[float] = []

    def get_weights(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.policy.state_dict().items()}

    def update(self, batch: list[dict[str, np.ndarray]]) -> dict[str, float]:
        obs, actions, old_logp, advs = [], [], [], []
        for ep in batch:
            ret, discounted = 0.0, np.zeros_like(ep["rewards"])
            for i in range(len(ep["rewards"]) - 1, -1, -1):
                ret = ep["rewards"][i] + self.gamma * ret
                discounted[i] = ret
            obs.append(ep["obs"])
            actions.append(ep["actions"])
            old_logp.append(ep["logp"])
            advs.append(discounted)
            self.returns.append(float(ep["rewards"].sum()))
        adv = torch.as_tensor(np.concatenate(advs))
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        logits = self.policy(torch.as_tensor(np.concatenate(obs)))
        logp = torch.log_softmax(logits, -1).gather(1, torch.as_tensor(np.concatenate(actions))[:, None])[
            :, 0
        ]
        ratio = torch.exp(logp - torch.as_tensor(np.concatenate(old_logp)))
        loss = -torch.min(ratio * adv, torch.clamp(ratio, 0.8, 1.2) * adv).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return {"loss": loss.item(), "mean_return": float(np.mean([ep["rewards"].sum() for ep in batch]))}


def train(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    learner = PolicyGradientLearner(seed=args.seed)
    al = ActorLearner(
        WorkerFactory(args.step_latency),
        learner,
        mode=mode,
        num_workers=args.workers,
        rollouts_per_update=args.rollouts,
        staleness=args.staleness,
        kappa=1,
        backend=args.backend,
        seed=args.seed,
        context=args.context,
    )
    try:
        start = time.perf_counter()
        stats = al.run(updates=args.updates, time_budget=args.time_budget)
    finally:
        al.close()
    # Wall seconds until the running mean of the last 20 episode returns first reaches the target.
    reached = None
    for i, m in enumerate(stats.metrics):
        window = learner.returns[max(0, (i + 1) * args.rollouts - 20) : (i + 1) * args.rollouts]
        if window and np.mean(window) >= args.target:
            reached = m["time_s"]
            break
    return {
        "mode": mode,
        "updates": stats.updates,
        "wall_s": stats.wall_s,
        "seconds_to_target": reached,
        "final_return": float(np.mean(learner.returns[-20:])) if learner.returns else 0.0,
        "utilisation": stats.utilisation,
        "dropped_stale": stats.dropped_stale,
        "stats": stats,
        "elapsed": time.perf_counter() - start,
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="pull,push_pull")
    parser.add_argument("--backend", default="local", choices=("local", "ray"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rollouts", type=int, default=4, help="R: episodes per update")
    parser.add_argument("--staleness", type=int, default=2)
    parser.add_argument("--updates", type=int, default=60)
    parser.add_argument("--target", type=float, default=150.0, help="target mean return (last 20 episodes)")
    parser.add_argument("--step-latency", type=float, default=0.002)
    parser.add_argument("--time-budget", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--context", default="spawn", help="local worker start method (fork starts faster)")
    args = parser.parse_args(argv)
    results = [train(mode, args) for mode in args.modes.split(",")]
    print(
        f"{'mode':<10} {'updates':>7} {'wall s':>7} {'s to target':>11} {'final return':>12} {'util':>6} {'stale':>5}"
    )
    for r in results:
        to_target = f"{r['seconds_to_target']:.1f}" if r["seconds_to_target"] is not None else "-"
        print(
            f"{r['mode']:<10} {r['updates']:>7} {r['wall_s']:>7.1f} {to_target:>11} "
            f"{r['final_return']:>12.1f} {r['utilisation']:>6.1%} {r['dropped_stale']:>5}"
        )
    return results


if __name__ == "__main__":
    main()
