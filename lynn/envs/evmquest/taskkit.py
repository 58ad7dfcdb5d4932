"""The task kit of Lynn/EVMQuest-v0: what every task table is written with.

A task is a :class:`TaskLogic`: its set-up, the state it measures before and after the agent
acts, the oracle's script (real Python source in the same form an agent writes,
``execute_skill(w3, agent_address, contracts)``) and its validator. Validators return weighted
:class:`Check` lists out of 100, computed from a :class:`Ctx`: the chain state measured before
and after, the agent's transactions (receipts, calldata) and its query answers.

The tables import this module and nothing imports them back: :mod:`~lynn.envs.evmquest.atomic`
(``ATOMIC``), :mod:`~lynn.envs.evmquest.composites` (``COMPOSITES``), joined by
:mod:`~lynn.envs.evmquest.catalog` (``LOGIC``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any

from eth_utils import function_signature_to_4byte_selector

from lynn.envs.evmquest.answers import AnswerSpec, matches
from lynn.envs.evmquest.world import (
    AGENT,
    MAX_UINT,
    World,
    artifact,
)

E18 = 10**18
GAS_SANE = 1_000_000  # a single task transaction should never need more


def wei(amount: str | Decimal | int | float) -> int:
    """Whole units (decimal string) -> base units (18 decimals)."""
    return int(Decimal(str(amount)) * E18)


def selector(signature: str) -> str:
    return "0x" + function_signature_to_4byte_selector(signature).hex()


@dataclass
class Check:
    """One weighted validation check."""

    name: str
    weight: int
    passed: bool
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "weight": self.weight, "passed": self.passed, "detail": self.detail}


@dataclass
class TxRecord:
    """A transaction the env sent for the agent."""

    to: str | None
    data: str
    value: int
    status: int
    gas_used: int
    fee: int
    tx_hash: str
    logs: list[Any] = field(default_factory=list)
    gas_limit: int = 0

    @property
    def selector(self) -> str:
        return self.data[:10].lower() if self.data and len(self.data) >= 10 else "0x"


@dataclass
class Ctx:
    """What a validator sees."""

    world: World
    params: dict[str, Any]
    before: dict[str, Any]
    after: dict[str, Any]
    txs: list[TxRecord]
    answers: list[Any]

    @property
    def fees(self) -> int:
        """Fees paid over every transaction of the episode (reverted ones too)."""
        return sum(t.fee for t in self.txs)

    @property
    def tx(self) -> TxRecord | None:
        """The last transaction (the one atomic tasks are judged on)."""
        return self.txs[-1] if self.txs else None

    def addr(self, role: str) -> str:
        return self.world.addresses[role]

    def delta(self, key: str) -> int:
        return int(self.after[key]) - int(self.before[key])


# ----------------------------------------------------------------------------- what the last transaction did
def tx_ok(v: Ctx) -> bool:
    """The last transaction succeeded."""
    return v.tx is not None and v.tx.status == 1


def tx_to(v: Ctx, want: str) -> bool:
    """The last transaction was sent to ``want`` (any letter case)."""
    return v.tx is not None and (v.tx.to or "").lower() == want.lower()


def tx_calls(v: Ctx, *signatures: str) -> bool:
    """The last transaction calls one of ``signatures`` (by its 4-byte selector)."""
    return v.tx is not None and v.tx.selector in [selector(s) for s in signatures]


# ----------------------------------------------------------------------------- check helpers
def close(got: int, want: int, rel: float = 1e-3) -> bool:
    if want == 0:
        return got == 0
    return abs(got - want) <= abs(want) * rel


def c_status(v: Ctx, weight: int = 30) -> Check:
    tx = v.tx
    return Check(
        "tx_status", weight, tx_ok(v), "no transaction sent" if tx is None else f"status={tx.status}"
    )


def c_to(v: Ctx, want: str, weight: int, name: str = "target") -> Check:
    tx = v.tx
    got = tx.to if tx else None
    ok = got is not None and got.lower() == want.lower()
    return Check(name, weight, ok, f"to={got}, expected {want}")


def c_selector(v: Ctx, signatures: list[str], weight: int) -> Check:
    tx = v.tx
    return Check(
        "function",
        weight,
        tx_calls(v, *signatures),
        f"selector={tx.selector if tx else None}, expected one of {signatures}",
    )


def c_value(v: Ctx, want: int, weight: int, rel: float = 0.0) -> Check:
    tx = v.tx
    got = tx.value if tx else 0
    return Check("value", weight, tx is not None and close(got, want, rel), f"value={got}, expected {want}")


def c_gas(v: Ctx, weight: int = 10, limit: int = GAS_SANE) -> Check:
    tx = v.tx
    ok = tx is not None and 0 < tx.gas_used <= limit
    return Check("gas_sane", weight, ok, f"gas_used={tx.gas_used if tx else None}, limit {limit}")


def c_eq(name: str, weight: int, got: Any, want: Any, rel: float = 0.0) -> Check:
    if isinstance(want, int) and isinstance(got, int) and rel:
        ok = close(got, want, rel)
    elif isinstance(want, str) and isinstance(got, str):
        ok = got.lower() == want.lower()
    else:
        ok = got == want
    return Check(name, weight, ok, f"got {got}, expected {want}")


def c_answer(v: Ctx, want: Any, weight: int = 100) -> Check:
    """The episode's (last) answer equals the truth exactly, in the documented unit."""
    got = v.answers[-1] if v.answers else None
    ok = got is not None and matches(got, want)
    return Check("answer", weight, ok, f"answer={_short(got)}, expected {_short(want)}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 200 else text[:200] + "..."


# ----------------------------------------------------------------------------- oracle script helpers
def abi_json(artifact_name: str, *functions: str) -> str:
    abi = artifact(artifact_name)["abi"]
    picked = [item for item in abi if item.get("type") == "function" and item["name"] in functions]
    return json.dumps(picked, separators=(",", ":"))


def _indent(src: str) -> str:
    return "".join(f"    {line}\n" for line in src.strip("\n").splitlines()) if src.strip() else ""


def tx_script(key: str, art: str, functions: list[str], call: str, value: str = "0", pre: str = "") -> str:
    """Oracle source that returns one contract call as an unsigned transaction."""
    return (
        "import json\n\n"
        f"ABI = json.loads({abi_json(art, *functions)!r})\n\n\n"
        "def execute_skill(w3, agent_address, contracts):\n"
        f"    contract = w3.eth.contract(address=contracts[{key!r}], abi=ABI)\n"
        f"{_indent(pre)}"
        f'    return {{"to": contract.address, "data": contract.encode_abi({call}), "value": {value}}}\n'
    )


def query_script(key: str, art: str, functions: list[str], expr: str, pre: str = "") -> str:
    """Oracle source that answers a query from a contract."""
    return (
        "import json\n\n"
        f"ABI = json.loads({abi_json(art, *functions)!r})\n\n\n"
        "def execute_skill(w3, agent_address, contracts):\n"
        f"    contract = w3.eth.contract(address=contracts[{key!r}], abi=ABI)\n"
        f"{_indent(pre)}"
        f'    return {{"query_result": {expr}}}\n'
    )


def share(expr: str, percent: Any) -> str:
    """Source for ``percent``% of ``expr`` in integer arithmetic (a mutant may pass a fractional percent)."""
    if isinstance(percent, int) and not isinstance(percent, bool):
        return f"{expr} * {percent} // 100"
    frac = Fraction(Decimal(str(percent))) / 100
    return f"{expr} * {frac.numerator} // {frac.denominator}"


def plain_script(body: str) -> str:
    return "def execute_skill(w3, agent_address, contracts):\n" + _indent(body)


# ----------------------------------------------------------------------------- logic
Measure = Callable[[World, dict[str, Any]], dict[str, Any]]
Steps = Callable[[dict[str, Any], dict[str, str], dict[str, Any]], list[str]]


@dataclass
class TaskLogic:
    """Behaviour of one task id."""

    script: Callable[[dict[str, Any], dict[str, str]], str]
    checks: Callable[[Ctx], list[Check]]
    measure: Measure = lambda w, p: {}
    setup: Callable[[World, dict[str, Any]], None] = lambda w, p: None
    # Composite tasks: the oracle's script for each step (params, names, pre-state measured at reset).
    steps: Steps | None = None
    # The shape and unit of the task's answer (None: the task asks no question).
    answer: AnswerSpec | None = None


# ----------------------------------------------------------------------------- chain reads and set-up
def bal(w: World, role: str, who: str) -> int:
    return int(w.reader(role).functions.balanceOf(who).call())


def native(w: World, who: str) -> int:
    return w.chain.get_balance(who)


def approve_as_agent(w: World, token: str, spender_role: str, amount: int = MAX_UINT) -> None:
    w.call(AGENT, token, "approve", w.addresses[spender_role], amount)


# ----------------------------------------------------------------------------- the DEX
ROUTER_FNS = [
    "swapExactETHForTokens", "swapExactTokensForETH", "swapExactTokensForTokens", "swapTokensForExactTokens",
    "getAmountsOut", "getAmountsIn", "addLiquidityETH", "addLiquidity", "removeLiquidityETH", "removeLiquidity",
]  # fmt: skip
DEADLINE = 'w3.eth.get_block("latest")["timestamp"] + 600'


def path_expr(n: dict[str, str], roles: list[str]) -> str:
    """Script source for the swap path over ``roles`` (``[contracts['WBNB'], ...]``)."""
    return "[" + ", ".join(f"contracts[{n[r]!r}]" for r in roles) + "]"


def swap_path(p: dict[str, Any]) -> list[str]:
    """The roles of a task's ``path`` parameter."""
    return [str(r) for r in p["path"]]


def s_add_eth(n: dict[str, str], token: str, amount_native: str) -> str:
    """Oracle source that adds ``amount_native`` of the native coin and its worth of ``token`` to their pool."""
    pre = (
        f'amount_native = w3.to_wei({amount_native!r}, "ether")\n'
        f"path = {path_expr(n, ['wrapped', token])}\n"
        "amount_token = contract.functions.getAmountsOut(amount_native, path).call()[-1] * 1005 // 1000\n"
        f"deadline = {DEADLINE}"
    )
    call = '"addLiquidityETH", args=[path[1], amount_token, 0, amount_native * 99 // 100, agent_address, deadline]'
    return tx_script(n["router"], "UniswapV2Router02", ROUTER_FNS, call, "amount_native", pre)
