"""Task data of Lynn/EVMQuest-v0: loading the JSON task files and instantiating them.

A task file (``tasks/<task_id>.json``) holds ``task_id``, ``split`` (atomic/composite),
``category``, ``description``, ``templates`` (≥ 3 instructions with ``{param}`` slots),
``params`` (generation rules, below), ``mutant`` (how the validity test breaks the oracle) and,
for composites, ``steps`` and ``optimal_steps``.

Parameter rules: ``{"rule": "uniform", "low", "high", "decimals"}``, ``{"rule": "int", "low",
"high"}``, ``{"rule": "choice", "values": [...]}``, ``{"rule": "token", "values": [roles]}``
(rendered as the profile's symbol), ``{"rule": "fresh_address"}``, ``{"rule": "agent"}``,
``{"rule": "account", "values": ["agent", "friend"]}``,
``{"rule": "fixed", "value": ...}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

TASK_DIR = Path(__file__).resolve().parent / "tasks"
SPLITS = ("atomic", "composite", "all")


@dataclass(frozen=True)
class TaskSpec:
    """One task as written in its data file."""

    task_id: str
    split: str
    category: str
    description: str
    templates: tuple[str, ...]
    params: dict[str, dict[str, Any]]
    mutant: dict[str, Any]
    steps: tuple[str, ...] = ()
    optimal_steps: int = 1

    @property
    def max_steps(self) -> int:
        return 3 if self.split == "atomic" else 2 * self.optimal_steps


@dataclass
class TaskInstance:
    """A task with its parameters drawn: what one episode is about."""

    spec: TaskSpec
    params: dict[str, Any]
    instruction: str
    template_index: int
    display: dict[str, str] = field(default_factory=dict)
    scoring: str = "default"  # the env's scoring profile (the oracle adapts answer formats to it)

    @property
    def task_id(self) -> str:
        return self.spec.task_id


@cache
def load_specs() -> dict[str, TaskSpec]:
    """Every task file, by id (sorted: atomic first, then composite)."""
    specs = {}
    for path in sorted(TASK_DIR.glob("*.json")):
        raw = json.loads(path.read_text())
        spec = TaskSpec(
            task_id=raw["task_id"],
            split=raw["split"],
            category=raw["category"],
            description=raw["description"],
            templates=tuple(raw["templates"]),
            params=raw.get("params", {}),
            mutant=raw.get("mutant", {}),
            steps=tuple(raw.get("steps", ())),
            optimal_steps=int(raw.get("optimal_steps", 1)),
        )
        if spec.task_id != path.stem:
            raise ValueError(f"{path}: task_id {spec.task_id!r} does not match the file name")
        specs[spec.task_id] = spec
    return dict(sorted(specs.items(), key=lambda kv: (kv[1].split != "atomic", kv[0])))


def _fresh_address(rng: np.random.Generator) -> str:
    from eth_utils import to_checksum_address

    return to_checksum_address("0x" + bytes(rng.integers(0, 256, size=20, dtype=np.uint8)).hex())


def draw_param(rule: dict[str, Any], rng: np.random.Generator, accounts: dict[str, str]) -> Any:
    """One parameter value from its rule (JSON-able: decimals are strings)."""
    kind = rule["rule"]
    if kind == "uniform":
        decimals = int(rule.get("decimals", 3))
        value = rng.uniform(float(rule["low"]), float(rule["high"]))
        quantum = Decimal(1).scaleb(-decimals)
        text = str(Decimal(repr(value)).quantize(quantum))
        return text if Decimal(text) > 0 else str(quantum)
    if kind == "int":
        return int(rng.integers(int(rule["low"]), int(rule["high"]) + 1))
    if kind in ("choice", "token"):
        values = rule["values"]
        return values[int(rng.integers(len(values)))]
    if kind == "fresh_address":
        return _fresh_address(rng)
    if kind == "agent":
        return accounts["agent"]
    if kind == "account":
        values = rule["values"]
        return accounts[values[int(rng.integers(len(values)))]]
    if kind == "fixed":
        return rule["value"]
    raise ValueError(f"unknown parameter rule {kind!r}")


def instantiate(
    spec: TaskSpec,
    rng: np.random.Generator,
    agent: str,
    names: dict[str, str],
    globals_: dict[str, str],
    accounts: dict[str, str] | None = None,
) -> TaskInstance:
    """Draw parameters and render one template (``names``: role -> symbol; ``accounts``: label -> address)."""
    accounts = {"agent": agent, **(accounts or {})}
    params = {name: draw_param(rule, rng, accounts) for name, rule in spec.params.items()}
    display = dict(globals_)
    for name, value in params.items():
        rule = spec.params[name]
        if rule["rule"] == "token" or (isinstance(value, str) and value in names):
            display[name] = names[value]
        elif isinstance(value, list):
            display[name] = " -> ".join(names.get(v, str(v)) for v in value)
        else:
            display[name] = str(value)
    # Derived slots: a swap path's ends, and the display name of a pool or pair role.
    if isinstance(params.get("path"), list):
        display["path_in"] = names[params["path"][0]]
        display["path_out"] = names[params["path"][-1]]
    for slot in ("pool", "pair"):
        if isinstance(params.get(slot), str) and params[slot] in names:
            display[f"{slot}_name"] = names[params[slot]]
    index = int(rng.integers(len(spec.templates)))
    instruction = spec.templates[index].format(**display)
    return TaskInstance(
        spec=spec, params=params, instruction=instruction, template_index=index, display=display
    )


def mutate(instance: TaskInstance, rng: np.random.Generator) -> dict[str, Any]:
    """Parameters broken as the task's ``mutant`` rule says (for the validity tests)."""
    rule = instance.spec.mutant
    params = dict(instance.params)
    op = rule.get("op")
    name = rule.get("param")
    if op == "scale":
        params[name] = str(Decimal(str(params[name])) * Decimal(str(rule.get("factor", 2))))
    elif op == "scale_all":
        for key in [k for k in params if k.startswith("amount")]:
            params[key] = str(Decimal(str(params[key])) * Decimal(str(rule.get("factor", 2))))
    elif op == "add":
        params[name] = params[name] + int(rule.get("delta", 1))
    elif op == "fresh_address":
        params[name] = _fresh_address(rng)
    elif op == "set":
        params[name] = rule["value"]
    elif op == "swap_token":
        values = [v for v in instance.spec.params[name]["values"] if v != params[name]] or [rule["value"]]
        params[name] = rule.get("value", values[0])
    return params


MUTANT_WRAPPERS = {
    # A query answered wrongly: every number changed, every string altered, booleans flipped.
    "wrong_answer": """

def _corrupt(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value * 2 + 7
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, list):
        return [_corrupt(v) for v in value]
    if isinstance(value, dict):
        return {k: _corrupt(v) for k, v in value.items()}
    return value


_oracle_skill = execute_skill


def execute_skill(w3, agent_address, contracts):
    return {"query_result": _corrupt(_oracle_skill(w3, agent_address, contracts)["query_result"])}
""",
    # The right call sent to the wrong contract (the agent's own address).
    "wrong_target": """

_oracle_skill = execute_skill


def execute_skill(w3, agent_address, contracts):
    tx = _oracle_skill(w3, agent_address, contracts)
    tx["to"] = agent_address
    return tx
""",
}


def mutant_script(instance: TaskInstance, names: dict[str, str], rng: np.random.Generator) -> str:
    """A broken solution of ``instance`` (its task's ``mutant`` rule); it must not pass."""
    from lynn.envs.evmquest.catalog import LOGIC

    logic = LOGIC[instance.task_id]
    op = instance.spec.mutant.get("op")
    if op in MUTANT_WRAPPERS:
        return logic.script(instance.params, names) + MUTANT_WRAPPERS[op]
    return logic.script(mutate(instance, rng), names)


def oracle_steps(instance: TaskInstance, names: dict[str, str], before: dict[str, Any]) -> list[str]:
    """The oracle's scripts for ``instance``: one for an atomic task, one per step for a composite."""
    from lynn.envs.evmquest.catalog import LOGIC

    logic = LOGIC[instance.task_id]
    scripts = (
        [logic.script(instance.params, names)]
        if logic.steps is None
        else logic.steps(instance.params, names, before)
    )
    if instance.scoring == "reference":
        from lynn.envs.evmquest.reference import oracle_scripts

        return oracle_scripts(instance.task_id, scripts, instance.params, names)
    return scripts


def mutant_steps(
    instance: TaskInstance, names: dict[str, str], before: dict[str, Any], rng: np.random.Generator
) -> list[str]:
    """A broken solution (atomic or composite) of ``instance``; it must not pass."""
    from lynn.envs.evmquest.catalog import LOGIC

    logic = LOGIC[instance.task_id]
    if logic.steps is None:
        return [mutant_script(instance, names, rng)]
    rule = instance.spec.mutant
    op = rule.get("op")
    scripts = logic.steps(instance.params, names, before)
    if op == "wrong_answer":
        return [s + MUTANT_WRAPPERS["wrong_answer"] if '"query_result"' in s else s for s in scripts]
    if op == "drop_step":
        return [s for i, s in enumerate(scripts) if i != int(rule["index"])]
    if op == "drop_steps":
        return [s for i, s in enumerate(scripts) if i not in set(rule["indices"])]
    return logic.steps(mutate(instance, rng), names, before)


# ----------------------------------------------------------------------------- generic mutants
AMOUNT_FACTORS = ("1.02", "0.98", "1.0005", "0.9995")

ANSWER_WRAPPER = """

_oracle_skill = execute_skill


def _mutate_answer(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return {const}
    if isinstance(value, str):
        return "0x0000000000000000000000000000000000000000" if value.startswith("0x") else ""
    if isinstance(value, dict):
        return {{k: _mutate_answer(v) for k, v in value.items()}}
    return value


def _spray(value):
    if isinstance(value, dict):
        return {{**value, **{{f"{{k}}_alt": v for k, v in value.items()}}}}
    if isinstance(value, int) and not isinstance(value, bool):
        return [value - 1, value, value + 1]
    return [value, value]


def execute_skill(w3, agent_address, contracts):
    out = _oracle_skill(w3, agent_address, contracts)
    if isinstance(out, dict) and "query_result" in out:
        return {{"query_result": {how}(out["query_result"])}}
    return out
"""

WRONG_TOKEN_WRAPPER = """

_oracle_skill = execute_skill
_SWAP = {swap!r}


def execute_skill(w3, agent_address, contracts):
    tx = _oracle_skill(w3, agent_address, contracts)
    by_address = {{contracts[a].lower(): contracts[b] for a, b in _SWAP.items()}}
    if isinstance(tx, dict) and str(tx.get("to", "")).lower() in by_address:
        tx["to"] = by_address[str(tx["to"]).lower()]
    return tx
"""

EXTRA_STEP = (
    "def execute_skill(w3, agent_address, contracts):\n"
    "    w3.eth.get_balance(agent_address)  # a redundant read: one more round, nothing reported\n"
    '    return {"query_result": {}}\n'
)


def _scaled(value: Any, factor: str) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value + (1 if Decimal(factor) > 1 else -1)
    return str(Decimal(str(value)) * Decimal(factor))


def _solve(
    instance: TaskInstance, names: dict[str, str], before: dict[str, Any], params: dict[str, Any]
) -> list[str]:
    from lynn.envs.evmquest.catalog import LOGIC

    logic = LOGIC[instance.task_id]
    if logic.steps is None:
        return [logic.script(params, names)]
    return logic.steps(params, names, before)


def generic_mutants(
    instance: TaskInstance, names: dict[str, str], before: dict[str, Any], rng: np.random.Generator
) -> list[tuple[str, list[str]]]:
    """Broken solutions of every task, by name (each must fail; see :func:`extra_step_solution`).

    The task's own ``mutant`` rule, then: every amount (and percentage) scaled by ±2% and
    ±0.05% (integer counts ±1); each recipient/spender/operator replaced by a fresh address and
    each account flipped; each token choice replaced by another; transactions sent to another
    token contract of the same kind; answers replaced by constants (0 or the agent's genesis
    balance; zero address; empty text) or sprayed (several candidates, or extra fields); each
    approve step of a composite skipped.
    """
    from lynn.envs.evmquest.catalog import LOGIC
    from lynn.envs.evmquest.world import AGENT_NATIVE

    spec = instance.spec
    params = instance.params
    out: list[tuple[str, list[str]]] = [("task_rule", mutant_steps(instance, names, before, rng))]
    amount_keys = [k for k in params if k.startswith("amount") or k == "percent"]
    if amount_keys:
        for factor in AMOUNT_FACTORS:
            bad = dict(params)
            for key in amount_keys:
                bad[key] = _scaled(params[key], factor)
            out.append((f"amount_x{factor}", _solve(instance, names, before, bad)))
    answer = LOGIC[instance.task_id].answer
    for key, rule in spec.params.items():
        if answer is not None and answer.kind == "bool" and rule["rule"] == "fresh_address":
            continue  # asking about any other address answers "no": right by chance half the time
        if not any("{" + key + "}" in t for t in spec.templates):
            continue  # a set-up parameter the instruction never names: no solution can get it wrong
        if rule["rule"] == "fresh_address":
            bad = {**params, key: _fresh_address(rng)}
            out.append((f"wrong_{key}", _solve(instance, names, before, bad)))
        elif rule["rule"] == "account":
            from lynn.envs.evmquest.world import AGENT, FRIEND

            other = FRIEND.address if params[key] == AGENT.address else AGENT.address
            out.append((f"wrong_{key}", _solve(instance, names, before, {**params, key: other})))
        elif rule["rule"] == "token" and len(rule["values"]) > 1:
            others = [v for v in rule["values"] if v != params[key]]
            bad = {**params, key: others[int(rng.integers(len(others)))]}
            out.append((f"wrong_{key}", _solve(instance, names, before, bad)))
    scripts = _solve(instance, names, before, params)
    # Not a permutation: a composite's approvals must not all land on some token anyway.
    swap = {
        names["stable"]: names["gov"],
        names["stable2"]: names["gov"],
        names["gov"]: names["stable"],
    }
    targets = [f"contract(address=contracts[{names[r]!r}]" for r in ("stable", "stable2", "gov")]
    hits = ['"query_result"' not in s and any(t in s for t in targets) for s in scripts]
    if any(hits):
        wrapper = WRONG_TOKEN_WRAPPER.format(swap=swap)
        fixed = [s + wrapper if hit else s for s, hit in zip(scripts, hits, strict=True)]
        out.append(("wrong_token_contract", fixed))
    if spec.split == "atomic" and answer is None:
        out.append(("wrong_target", [scripts[0] + MUTANT_WRAPPERS["wrong_target"]]))
    if answer is not None:
        variants = {"spray": ANSWER_WRAPPER.format(const=0, how="_spray")}
        if answer.kind != "bool":
            variants["const_zero"] = ANSWER_WRAPPER.format(const=0, how="_mutate_answer")
            variants["const_genesis_balance"] = ANSWER_WRAPPER.format(
                const=AGENT_NATIVE * 10**18, how="_mutate_answer"
            )
        for name, wrapper in variants.items():
            out.append((f"answer_{name}", [s + wrapper if '"query_result"' in s else s for s in scripts]))
    if spec.split == "composite":
        for i, s in enumerate(scripts):
            if '"approve", args=' in s:
                out.append((f"skip_approve_step_{i}", scripts[:i] + scripts[i + 1 :]))
    return out


def extra_step_solution(
    instance: TaskInstance, names: dict[str, str], before: dict[str, Any]
) -> tuple[list[str], float]:
    """A composite's oracle with one redundant round appended, and the factor it must score."""
    scripts = _solve(instance, names, before, instance.params)
    return [*scripts, EXTRA_STEP], instance.spec.optimal_steps / (len(scripts) + 1)
