"""Session fixtures for the LM tests (loaded by tests/conftest.py): a tiny target LM trained once per
test run on real EVMQuest oracle demonstrations (seconds; once per run under pytest-xdist too, see
tests/_shared.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._shared import built_once

EVM_TASKS = ["bnb_transfer_basic", "wbnb_deposit", "query_gas_price"]

#: What a local LM rollout worker imports. A fork server that imported them once saves each worker ~5 CPU-s
#: of imports over spawn; like spawn, a worker forks no thread of the test process. The last one deploys the
#: EVMQuest genesis in the server, which each worker's chain then copies (~1.7 CPU-s a worker; tests/_evm_genesis.py).
LM_WORKER_MODULES = [
    "torch",
    "transformers",
    "transformers.models.llama.modeling_llama",
    "lynn.agents.llm.rollouts",
    "lynn.agents.llm.policy",
    "lynn.envs.evmquest.evmquest_env",
    "lynn.envs.evmquest.world",
    "tests._evm_genesis",
]


def lm_worker_context() -> str:
    """Start method for the local LM rollout workers of a test: ``forkserver`` with :data:`LM_WORKER_MODULES`
    preloaded. A fork server an earlier test started without them is restarted when nothing it forked is
    alive (multiprocessing keeps one server per process; it has no public way to ask what it preloaded)."""
    import multiprocessing as mp
    from multiprocessing import forkserver

    if "forkserver" not in mp.get_all_start_methods():
        return "spawn"
    modules = ["__main__", *LM_WORKER_MODULES]  # __main__: multiprocessing's own default
    server = forkserver._forkserver
    if server._preload_modules != modules:
        if server._forkserver_pid is not None and not mp.active_children():
            server._stop()  # as tests/conftest.py does at the end of a session
        mp.set_forkserver_preload(modules)
    return "forkserver"


@pytest.fixture(scope="session")
def evm_demos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from lynn.eval.collect import CollectConfig, collect

    def build(out: Path) -> None:
        collect(
            CollectConfig(
                "Lynn/EVMQuest-v0",
                tasks=EVM_TASKS,
                seeds=list(range(100_000, 100_016)),
                out=str(out),
                progress=False,
            )
        )

    return built_once(tmp_path_factory, "evm_demos", build)[0]


@pytest.fixture(scope="session")
def tiny_lm(evm_demos: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from lynn.lm.train import TrainConfig, train_lm

    def build(out: Path) -> None:
        train_lm(
            TrainConfig(
                data=str(evm_demos),
                out=str(out),
                size="tiny",
                epochs=12,
                batch_size=8,
                lr=3e-3,
                progress=False,
                threads=1,
            )
        )

    return built_once(tmp_path_factory, "tiny_lm", build)[0]
