"""Solve an EVMQuest task with your own script, then with a raw JSON transaction.

Run: .venv/bin/python examples/evmquest_own_script.py
"""

from __future__ import annotations

import json
import re

import gymnasium as gym

import lynn  # noqa: F401  (registers the Lynn/* env ids)

# A script is plain Python: it gets a web3 connection (read-only; the env signs what you return),
# your address and the contract addresses, and returns an unsigned transaction.
WRAP = """
def execute_skill(w3, agent_address, contracts):
    return {{"to": contracts["WBNB"], "data": "0xd0e30db0", "value": w3.to_wei("{amount}", "ether")}}
"""

env = gym.make("Lynn/EVMQuest-v0", task="wbnb_deposit")
obs, info = env.reset(seed=7)
print(obs["instruction"])
amount = re.search(r"\d+\.\d+", obs["instruction"]).group()  # e.g. "Wrap 0.523 BNB into WBNB."
obs, reward, terminated, truncated, info = env.step(WRAP.format(amount=amount))
print(
    f"reward={reward} success={info['success']} checks={[(c['name'], c['passed']) for c in info['checks']]}"
)
assert reward == 1.0
env.close()

# The same kind of task with action_mode="tx": a JSON call the env encodes, signs and sends.
env = gym.make("Lynn/EVMQuest-v0", task="contract_call_with_params", action_mode="tx")
obs, info = env.reset(seed=1)
message = re.search(r'"(.*)"', obs["instruction"]).group(1)
action = {"contract": "MessageBoard", "function": "postMessage", "args": [message]}
obs, reward, terminated, truncated, info = env.step(json.dumps(action))
print(obs["instruction"], "->", reward)
assert reward == 1.0
env.close()
