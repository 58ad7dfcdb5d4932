from __future__ import annotations

from collections.abc import Iterator

import pytest

from lynn.envs.evmquest.evmquest_env import EVMQuestEnv


@pytest.fixture(scope="session")
def evm_env() -> Iterator[EVMQuestEnv]:
    """One embedded-chain env (one genesis, one sandbox server) shared by the EVMQuest tests."""
    env = EVMQuestEnv(split="all")
    yield env
    env.close()
