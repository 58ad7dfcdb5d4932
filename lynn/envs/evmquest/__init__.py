"""Lynn/EVMQuest-v0: EVM-QuestBench as a Gymnasium env (see evmquest_env.py)."""
