"""Hidden per-episode state for the default profile: answers that cannot be memorised.

Genesis is deterministic, so without help every query about it has one answer on every seed
(the agent's balance, a pair's reserves, the block number, ...) and a script that returns a
constant would pass. Before measuring, :func:`apply` perturbs exactly what a task asks about
with amounts drawn from the episode's RNG: the deployer sends a random amount, the account
sends a random number of transactions, a random swap moves the reserves, random blocks are
mined, the node's suggested gas price changes. The instruction is unchanged; the answer is then
only knowable by reading the chain.

Each task lists its perturbations as ``"kind:arg:..."`` strings (args are parameter names, roles,
or ``agent``). Values are drawn once at reset (:func:`draw`) and kept in the instance's params
under ``"hidden"``, so a seed reproduces them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from eth_utils import to_checksum_address

from lynn.envs.evmquest.world import AGENT, DEPLOYER, FRIEND, World

E15, E18 = 10**15, 10**18
DEFAULT_GAS_PRICE = 10**9

NOISE: dict[str, tuple[str, ...]] = {
    "query_bnb_balance": ("native:account",),
    "query_erc20_balance": ("token:token:account",),
    "query_erc20_allowance": ("allowance:stable:owner:agent",),
    "query_nft_owner": ("nft_holder:token_id",),
    "query_nft_balance": ("nft_count:account",),
    "query_pair_reserves": ("swap:pair",),
    "query_pending_rewards": ("stake:pool", "blocks"),
    "query_staked_amount": ("stake:pool",),
    "query_token_total_supply": ("supply:token",),
    "query_current_block_number": ("blocks",),
    "query_gas_price": ("gas_price",),
    "query_transaction_count_nonce": ("nonce:account",),
    "composite_batch_query_2_balances": ("native:agent", "token:token:agent"),
    "composite_batch_query_portfolio": (
        "native:agent",
        "token:wrapped:agent",
        "token:stable:agent",
        "token:gov:agent",
    ),
    "composite_approve_swap_query_result": ("token:stable2:agent",),
    "composite_query_allowance_approve_verify": ("allowance:stable:agent:spender",),
    "composite_query_balance_wrap_verify": ("native:agent", "token:wrapped:agent"),
    "composite_query_bnb_transfer_verify": ("native:agent",),
    "composite_query_erc20_transfer_verify": ("token:token:agent",),
    "composite_query_reserves_before_after_swap": ("swap:pair_stable_stable2",),
    "composite_query_rewards_harvest_verify": ("blocks", "token:gov:agent"),
    "composite_query_staked_stake_verify": ("stake:staking_pool",),
    "composite_unstake_harvest_query": ("token:gov:agent",),
}

# Ranges of the drawn values (low inclusive, high exclusive).
RANGES = {
    "native": (E15, E18),
    "token": (E15, 100 * E18),
    "allowance": (E15, 1_000 * E18),
    "swap": (E15, E18),
    "stake": (E15, 10 * E18),
    "blocks": (1, 33),
    "nonce": (0, 8),
    "nft_holder": (0, 2**63 - 1),
    "nft_count": (0, 8),
    "supply": (E18, 10**24),
    "gas_price": (DEFAULT_GAS_PRICE, 20 * DEFAULT_GAS_PRICE),
}


def draw(task_id: str, rng: np.random.Generator) -> dict[str, int]:
    """The hidden values of one episode of ``task_id`` (empty for tasks without any)."""
    out = {}
    for op in NOISE.get(task_id, ()):
        low, high = RANGES[op.split(":")[0]]
        # Python-int arithmetic: the ranges exceed int64.
        out[op] = low + int(rng.integers(0, 2**62, dtype=np.int64)) * (high - low) // 2**62
    return out


def _who(p: dict[str, Any], name: str) -> str:
    return AGENT.address if name == "agent" else str(p[name])


def _key_of(address: str) -> Any:
    for account in (AGENT, FRIEND, DEPLOYER):
        if account.address.lower() == address.lower():
            return account
    raise ValueError(f"no key for {address}")


def reset_node_defaults(world: World) -> None:
    """Undo node-level settings a previous episode's noise changed (embedded gas price)."""
    _set_gas_price(world, DEFAULT_GAS_PRICE)


def _set_gas_price(world: World, wei: int) -> None:
    chain = world.chain
    if chain.name == "embedded":
        from web3.providers.eth_tester.defaults import static_return

        chain.w3.provider.api_endpoints["eth"]["gasPrice"] = static_return(int(wei))  # type: ignore[attr-defined]
    elif wei != DEFAULT_GAS_PRICE:
        # anvil reports the next block's base fee (plus a tip) as its gas price.
        chain.raw_request("anvil_setNextBlockBaseFeePerGas", [hex(int(wei))])
        chain.raw_request("evm_mine", [])


def _mine(world: World, blocks: int) -> None:
    chain = world.chain
    if chain.name == "embedded":
        chain.tester.mine_blocks(blocks)  # type: ignore[attr-defined]
        return
    try:
        chain.raw_request("anvil_mine", [hex(blocks)])
    except Exception:
        for _ in range(blocks):
            chain.raw_request("evm_mine", [])


def apply(world: World, params: dict[str, Any]) -> None:
    """Perturb the chain as the instance's ``hidden`` values say."""
    w, p = world, params
    deadline = 2**40
    for op, x in p.get("hidden", {}).items():
        kind, *args = op.split(":")
        if kind == "native":
            w.send(DEPLOYER, {"to": _who(p, args[0]), "value": x}, gas=21_000)
        elif kind == "token":
            role = str(p.get(args[0], args[0]))
            if role == "wrapped":
                w.call(DEPLOYER, "wrapped", "deposit", value=x, gas=100_000)
            w.call(DEPLOYER, role, "transfer", _who(p, args[1]), x)
        elif kind == "allowance":
            owner = _who(p, args[1])
            w.call(_key_of(owner), args[0], "approve", _who(p, args[2]), x)
        elif kind == "swap":
            pair = str(p.get(args[0], args[0]))
            if pair.startswith("pair_wrapped_"):
                path = [w.addresses["wrapped"], w.addresses[pair.removeprefix("pair_wrapped_")]]
                w.call(
                    DEPLOYER, "router", "swapExactETHForTokens", 0, path, DEPLOYER.address, deadline, value=x
                )
            else:
                path = [w.addresses["stable"], w.addresses["stable2"]]
                w.call(
                    DEPLOYER,
                    "router",
                    "swapExactTokensForTokens",
                    x * 1000,
                    0,
                    path,
                    DEPLOYER.address,
                    deadline,
                )
        elif kind == "stake":
            pool = str(p.get(args[0], args[0]))
            token = "gov" if pool == "staking_pool" else "pair_wrapped_stable"
            w.call(AGENT, token, "approve", w.addresses[pool], x)
            w.call(AGENT, pool, "deposit", x)
        elif kind == "blocks":
            _mine(w, x)
        elif kind == "nonce":
            who = _who(p, args[0])
            for _ in range(x):
                w.send(_key_of(who), {"to": who, "value": 0}, gas=21_000)
        elif kind == "nft_holder":
            token_id = int(p[args[0]])
            owner = w.read("nft", "ownerOf", token_id)
            holder = to_checksum_address("0x" + x.to_bytes(8, "big").hex().rjust(40, "7"))
            w.call(_key_of(owner), "nft", "transferFrom", owner, holder, token_id)
        elif kind == "nft_count":
            for i in range(x):
                w.call(DEPLOYER, "nft", "mint", _who(p, args[0]), 1_000 + i)
        elif kind == "supply":
            role = str(p[args[0]])
            if role == "wrapped":
                w.call(DEPLOYER, "wrapped", "deposit", value=x // 10**4, gas=100_000)
            else:
                w.call(DEPLOYER, role, "burn", x)
        elif kind == "gas_price":
            _set_gas_price(w, x)
        else:
            raise ValueError(f"unknown noise kind {kind!r}")
