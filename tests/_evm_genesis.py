"""Preloaded by the LM rollout workers' fork server (``tests._lm_fixtures.LM_WORKER_MODULES``): importing this
module deploys the EVMQuest genesis of the default profile on an embedded chain once, in that server, so that
every worker it forks finds it in :func:`lynn.envs.evmquest.world.genesis_world`'s per-process cache and starts
its chain from a copy instead of deploying its own (~1.7 CPU-s a worker; the same blocks, contracts and balances,
see that function). Nothing else is started: no sandbox, no node.

A failure here is swallowed: the fork server must start whatever happens (multiprocessing only ignores an
ImportError in a preloaded module), and a worker then deploys its own genesis as before."""

from __future__ import annotations


def _deploy_genesis() -> bool:
    try:
        from lynn.envs.evmquest.evmquest_env import EVMQuestEnv

        env = EVMQuestEnv()
        try:
            env._ensure_chain()  # the chain and its genesis; the sandbox starts on the first step only
        finally:
            env.close()
        return True
    except Exception:  # noqa: BLE001  (see the module docstring)
        return False


DEPLOYED = _deploy_genesis()
