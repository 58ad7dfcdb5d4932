"""A library of parameterised skills for ``action_mode="skill"`` (the SB3 path).

Each skill parses its arguments (amounts, addresses, token symbols, ids, quoted text) from the
instruction and builds the action the env then executes: an unsigned transaction or a query
answer. Skills are the env's own trusted code, so they run in the env's process (no sandbox);
choosing the right skill for the instruction is what an RL policy learns.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
NUMBER = re.compile(r"(?<![\w#.])(\d+(?:\.\d+)?)(?![\w.])")
TOKEN_ID = re.compile(r"#\s?(\d+)|token (\d+)|NFT (\d+)|item (\d+)|\((\d+)\)")
QUOTED = re.compile(r'"([^"]*)"')


class SkillError(ValueError):
    """The skill could not find its arguments in the instruction."""


@dataclass
class SkillContext:
    """What a skill may use: the instruction, names, addresses, and read access to the chain."""

    instruction: str
    names: dict[str, str]  # role -> display name
    addresses: dict[str, str]  # role -> address
    agent: str
    world: Any

    def address(self, allow_agent: bool = False) -> str:
        found = [
            a for a in ADDRESS.findall(self.instruction) if allow_agent or a.lower() != self.agent.lower()
        ]
        if not found:
            raise SkillError("no address in the instruction")
        return found[0]

    def amount(self) -> int:
        numbers = [n for n in NUMBER.findall(self.instruction)]
        if not numbers:
            raise SkillError("no amount in the instruction")
        return int(Decimal(numbers[0]) * 10**18)

    def token(self, roles: tuple[str, ...] = ("stable", "stable2", "gov", "wrapped")) -> str:
        hits = []
        for role in roles:
            match = re.search(rf"\b{re.escape(self.names[role])}\b", self.instruction)
            if match:
                hits.append((match.start(), role))
        if not hits:
            raise SkillError("no token symbol in the instruction")
        return min(hits)[1]

    def token_id(self) -> int:
        match = TOKEN_ID.search(self.instruction)
        if not match:
            raise SkillError("no token id in the instruction")
        return int(next(g for g in match.groups() if g))

    def quoted(self) -> str:
        match = QUOTED.search(self.instruction)
        if not match:
            raise SkillError("no quoted text in the instruction")
        return match.group(1)

    def call(self, role: str, fn: str, *args: Any, value: int = 0) -> dict[str, Any]:
        data = self.world.contract(role).encode_abi(fn, args=list(args))
        # An explicit gas limit skips estimation (a third of a step's cost on the embedded chain).
        return {"to": self.addresses[role], "data": data, "value": value, "gas": 300_000}


Skill = Callable[[SkillContext], dict[str, Any]]


def _native_transfer(c: SkillContext) -> dict[str, Any]:
    return {"to": c.address(), "value": c.amount(), "data": "0x", "gas": 21_000}


def _erc20_transfer(c: SkillContext) -> dict[str, Any]:
    return c.call(c.token(("stable", "stable2", "gov")), "transfer", c.address(), c.amount())


def _erc20_approve(c: SkillContext) -> dict[str, Any]:
    return c.call(c.token(("stable", "stable2", "gov")), "approve", c.address(), c.amount())


def _erc20_burn(c: SkillContext) -> dict[str, Any]:
    return c.call(c.token(("stable", "stable2", "gov")), "burn", c.amount())


def _erc721_transfer(c: SkillContext) -> dict[str, Any]:
    return c.call("nft", "transferFrom", c.agent, c.address(), c.token_id())


def _query(value: Callable[[SkillContext], Any]) -> Skill:
    return lambda c: {"query_result": value(c)}


def _balance_of(c: SkillContext) -> int:
    role = c.token(("stable", "stable2", "gov", "wrapped"))
    return int(
        c.world.read(
            role, "balanceOf", c.address(allow_agent=True) if ADDRESS.search(c.instruction) else c.agent
        )
    )


SKILLS: list[tuple[str, Skill]] = [
    ("native_transfer", _native_transfer),
    ("wrap", lambda c: c.call("wrapped", "deposit", value=c.amount())),
    ("unwrap", lambda c: c.call("wrapped", "withdraw", c.amount())),
    ("erc20_transfer", _erc20_transfer),
    ("erc20_approve", _erc20_approve),
    ("erc20_burn", _erc20_burn),
    ("erc721_transfer", _erc721_transfer),
    ("erc721_set_approval_for_all", lambda c: c.call("nft", "setApprovalForAll", c.address(), True)),
    ("counter_increment", lambda c: c.call("counter", "increment")),
    ("donate", lambda c: c.call("donation", "donate", value=c.amount())),
    ("post_message", lambda c: c.call("board", "postMessage", c.quoted())),
    (
        "query_native_balance",
        _query(lambda c: int(c.world.chain.w3.eth.get_balance(c.address(allow_agent=True)))),
    ),
    ("query_erc20_balance", _query(_balance_of)),
    ("query_total_supply", _query(lambda c: int(c.world.read(c.token(), "totalSupply")))),
    ("query_block_number", _query(lambda c: int(c.world.chain.w3.eth.block_number))),
    ("query_gas_price", _query(lambda c: int(c.world.chain.w3.eth.gas_price))),
    ("query_nft_owner", _query(lambda c: c.world.read("nft", "ownerOf", c.token_id()))),
    ("query_nft_token_uri", _query(lambda c: c.world.read("nft", "tokenURI", c.token_id()))),
]
SKILL_NAMES = [name for name, _ in SKILLS]

# Atomic tasks this library can solve, with the skill that does it (used by tests and examples).
TASK_SKILL = {
    "bnb_transfer_basic": "native_transfer",
    "wbnb_deposit": "wrap",
    "wbnb_withdraw": "unwrap",
    "erc20_transfer_fixed": "erc20_transfer",
    "erc20_approve": "erc20_approve",
    "erc20_burn": "erc20_burn",
    "erc721_transfer": "erc721_transfer",
    "erc721_set_approval_for_all": "erc721_set_approval_for_all",
    "contract_call_simple": "counter_increment",
    "contract_call_with_value": "donate",
    "contract_call_with_params": "post_message",
    "query_bnb_balance": "query_native_balance",
    "query_erc20_balance": "query_erc20_balance",
    "query_token_total_supply": "query_total_supply",
    "query_current_block_number": "query_block_number",
    "query_gas_price": "query_gas_price",
    "query_nft_owner": "query_nft_owner",
    "query_nft_token_uri": "query_nft_token_uri",
}


def run_skill(index: int, ctx: SkillContext) -> tuple[dict[str, Any] | None, str | None]:
    """The action of skill ``index`` for ``ctx`` (or an error)."""
    if not 0 <= index < len(SKILLS):
        return None, f"skill index {index} out of range 0..{len(SKILLS) - 1}"
    name, skill = SKILLS[index]
    try:
        return skill(ctx), None
    except SkillError as exc:
        return None, f"skill {name}: {exc}"
    except Exception as exc:  # a skill must never take the env down
        return None, f"skill {name} failed: {exc}"
