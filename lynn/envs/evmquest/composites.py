"""The 45 composite tasks of Lynn/EVMQuest-v0: multi-step workflows judged on the final state.

Each composite registers a :class:`~lynn.envs.evmquest.taskkit.TaskLogic` whose ``steps`` gives
the oracle's scripts (one per step; they may use the pre-state measured at reset) and whose
validator scores the end state, the decoded calldata of the agent's transactions and its
answers. The env then applies the step-efficiency factor.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from eth_abi import decode

from lynn.envs.evmquest.answers import UNIT_INT, AnswerSpec, matches, merged_fields
from lynn.envs.evmquest.taskkit import (
    DEADLINE,
    ROUTER_FNS,
    Check,
    Ctx,
    Steps,
    TaskLogic,
    abi_json,
    bal,
    close,
    native,
    path_expr,
    plain_script,
    query_script,
    s_add_eth,
    selector,
    share,
    tx_script,
    wei,
)
from lynn.envs.evmquest.world import AGENT, World

TOKEN_ROLES = (
    "wrapped",
    "stable",
    "stable2",
    "gov",
    "pair_wrapped_stable",
    "pair_wrapped_gov",
    "pair_stable_stable2",
)
COMPOSITES: dict[str, TaskLogic] = {}


# ----------------------------------------------------------------------------- measuring
def measure_all(w: World, p: dict[str, Any]) -> dict[str, Any]:
    """Everything composite validators look at (about 20 view calls)."""
    a = AGENT.address
    out: dict[str, Any] = {"native": native(w, a)}
    for role in TOKEN_ROLES:
        out[role] = bal(w, role, a)
    for pool in ("lp_farm", "staking_pool"):
        out[f"{pool}_staked"] = int(w.read(pool, "stakedBalance", a))
        out[f"{pool}_pending"] = int(w.read(pool, "pendingReward", a))
    out["reserves_stable_stable2"] = [int(x) for x in w.read("pair_stable_stable2", "getReserves")[:2]]
    for key in ("r1", "r2", "r3", "recipient"):
        if key in p:
            out[f"{key}_native"] = native(w, p[key])
            out[f"{key}_token"] = bal(w, p.get("token", "stable"), p[key])
    for key in ("id1", "id2", "token_id"):
        if key in p:
            out[f"owner_{key}"] = w.read("nft", "ownerOf", int(p[key]))
    if "spender" in p:
        for role in ("stable", "stable2", "gov"):
            out[f"allowance_{role}"] = int(w.read(role, "allowance", a, p["spender"]))
    if "path" in p and "amount" in p:
        path = [w.addresses[r] for r in p["path"]]
        out["quote_out"] = int(w.read("router", "getAmountsOut", wei(p["amount"]), path)[-1])
    return out


# ----------------------------------------------------------------------------- checks
def c_all_ok(v: Ctx, weight: int) -> Check:
    ok = bool(v.txs) and all(t.status == 1 for t in v.txs)
    return Check(
        "all_transactions_succeeded",
        weight,
        ok,
        f"{len(v.txs)} transaction(s), statuses {[t.status for t in v.txs]}",
    )


def c_true(name: str, weight: int, ok: bool, detail: str = "") -> Check:
    return Check(name, weight, bool(ok), detail)


def c_close(name: str, weight: int, got: int, want: int, rel: float = 1e-3) -> Check:
    return Check(name, weight, close(int(got), int(want), rel), f"got {got}, expected {want}")


def c_field(v: Ctx, field: str, want: Any, weight: int) -> Check:
    """The named answer field (its last value over the episode) equals the truth exactly."""
    fields = merged_fields(v.answers)
    got = fields.get(field)
    ok = field in fields and matches(got, want)
    return Check(field, weight, ok, f"answered {str(got)[:120]}, expected {str(want)[:120]}")


def answer_fields(*fields: tuple[str, str]) -> AnswerSpec:
    return AnswerSpec(fields=tuple(fields))


def amount_field(name: str, what: str) -> tuple[str, str]:
    return (name, f"{what}, {UNIT_INT}")


def calls(v: Ctx, signature: str, types: list[str]) -> list[tuple[Any, ...]]:
    """Decoded arguments of the agent's successful calls to ``signature``."""
    out = []
    sel = selector(signature)
    for tx in v.txs:
        if tx.status == 1 and tx.selector == sel:
            try:
                out.append(decode(types, bytes.fromhex(tx.data[10:])))
            except Exception:
                continue
    return out


SWAP_TT = (
    "swapExactTokensForTokens(uint256,uint256,address[],address,uint256)",
    ["uint256", "uint256", "address[]", "address", "uint256"],
)
SWAP_ET = (
    "swapExactETHForTokens(uint256,address[],address,uint256)",
    ["uint256", "address[]", "address", "uint256"],
)
SWAP_TE = (
    "swapExactTokensForETH(uint256,uint256,address[],address,uint256)",
    ["uint256", "uint256", "address[]", "address", "uint256"],
)
WITHDRAW = ("withdraw(uint256)", ["uint256"])
ADD_ETH = (
    "addLiquidityETH(address,uint256,uint256,uint256,address,uint256)",
    ["address", "uint256", "uint256", "uint256", "address", "uint256"],
)
ADD_TT = (
    "addLiquidity(address,address,uint256,uint256,uint256,uint256,address,uint256)",
    ["address", "address", "uint256", "uint256", "uint256", "uint256", "address", "uint256"],
)


def swaps_value(v: Ctx, sig: tuple[str, list[str]]) -> list[tuple[int, Any]]:
    """(msg.value, decoded args) of successful swaps of this kind."""
    out = []
    sel = selector(sig[0])
    for tx in v.txs:
        if tx.status == 1 and tx.selector == sel:
            try:
                out.append((tx.value, decode(sig[1], bytes.fromhex(tx.data[10:]))))
            except Exception:
                continue
    return out


def fees(v: Ctx) -> int:
    return sum(t.fee for t in v.txs)


# ----------------------------------------------------------------------------- script helpers
def s_native(to_expr: str, amount: str) -> str:
    return plain_script(f'return {{"to": {to_expr}, "value": w3.to_wei({amount!r}, "ether"), "data": "0x"}}')


def s_call(
    n: dict[str, str], role: str, art: str, fns: list[str], call: str, value: str = "0", pre: str = ""
) -> str:
    return tx_script(n[role], art, fns, call, value, pre)


def s_approve(
    n: dict[str, str], token: str, spender: str, amount: str = "2**256 - 1", art: str = "LynnToken"
) -> str:
    """``spender``: a role (its contract) or a literal address."""
    spender_expr = f"contracts[{n[spender]!r}]" if spender in n else repr(spender)
    return s_call(n, token, art, ["approve"], f'"approve", args=[{spender_expr}, {amount}]')


def s_token_transfer(n: dict[str, str], token: str, to: str, amount: str) -> str:
    return s_call(
        n, token, "LynnToken", ["transfer"], f'"transfer", args=[{to!r}, w3.to_wei({amount!r}, "ether")]'
    )


def s_swap_tokens(n: dict[str, str], roles: list[str], amount_expr: str, min_pct: int = 98) -> str:
    pre = f"amount = {amount_expr}\npath = {path_expr(n, roles)}\nquote = contract.functions.getAmountsOut(amount, path).call()[-1]"
    call = f'"swapExactTokensForTokens", args=[amount, quote * {min_pct} // 100, path, agent_address, {DEADLINE}]'
    return tx_script(n["router"], "UniswapV2Router02", ROUTER_FNS, call, "0", pre)


def s_swap_eth(n: dict[str, str], roles: list[str], amount: str) -> str:
    pre = f'amount = w3.to_wei({amount!r}, "ether")\npath = {path_expr(n, roles)}\nquote = contract.functions.getAmountsOut(amount, path).call()[-1]'
    call = f'"swapExactETHForTokens", args=[quote * 98 // 100, path, agent_address, {DEADLINE}]'
    return tx_script(n["router"], "UniswapV2Router02", ROUTER_FNS, call, "amount", pre)


def s_swap_to_eth(n: dict[str, str], roles: list[str], amount: str) -> str:
    pre = f'amount = w3.to_wei({amount!r}, "ether")\npath = {path_expr(n, roles)}\nquote = contract.functions.getAmountsOut(amount, path).call()[-1]'
    call = f'"swapExactTokensForETH", args=[amount, quote * 98 // 100, path, agent_address, {DEADLINE}]'
    return tx_script(n["router"], "UniswapV2Router02", ROUTER_FNS, call, "0", pre)


def s_add_tokens(n: dict[str, str], a: str, b: str, amount_a: str, ratio_quote: bool) -> str:
    """addLiquidity of ``amount_a`` of ``a`` and the matching ``b`` (from the pool price when ``ratio_quote``)."""
    b_amount = (
        "contract.functions.getAmountsOut(amount_a, path).call()[-1] * 1005 // 1000"
        if ratio_quote
        else "amount_a"
    )
    pre = f'amount_a = w3.to_wei({amount_a!r}, "ether")\npath = {path_expr(n, [a, b])}\namount_b = {b_amount}\ndeadline = {DEADLINE}'
    call = '"addLiquidity", args=[path[0], path[1], amount_a, amount_b, amount_a * 98 // 100, 0, agent_address, deadline]'
    return tx_script(n["router"], "UniswapV2Router02", ROUTER_FNS, call, "0", pre)


def s_remove(
    n: dict[str, str], pair: str, liquidity_expr: str, eth: bool, a: str = "stable", b: str = "stable2"
) -> str:
    pre = f"pair = w3.eth.contract(address=contracts[{n[pair]!r}], abi=PAIR_ABI)\nliquidity = {liquidity_expr}\ndeadline = {DEADLINE}"
    if eth:
        call = f'"removeLiquidityETH", args=[contracts[{n[a]!r}], liquidity, 0, 0, agent_address, deadline]'
    else:
        call = f'"removeLiquidity", args=[contracts[{n[a]!r}], contracts[{n[b]!r}], liquidity, 0, 0, agent_address, deadline]'
    src = tx_script(n["router"], "UniswapV2Router02", ROUTER_FNS, call, "0", pre)
    return src.replace(
        "\n\n\ndef execute_skill",
        f"\nPAIR_ABI = json.loads({abi_json('UniswapV2Pair', 'balanceOf')!r})\n\n\ndef execute_skill",
        1,
    )


def s_pool(
    n: dict[str, str], pool: str, fn: str, amount_expr: str | None = None, token: str | None = None
) -> str:
    """A pool call; ``amount_expr`` may use ``held`` (the agent's balance of ``token``)."""
    pre = ""
    src_extra = ""
    if token is not None:
        pre = f"held = w3.eth.contract(address=contracts[{n[token]!r}], abi=ERC20_ABI).functions.balanceOf(agent_address).call()"
        src_extra = f"\nERC20_ABI = json.loads({abi_json('LynnToken', 'balanceOf')!r})"
    pre = (pre + "\n" if pre else "") + "staked = contract.functions.stakedBalance(agent_address).call()"
    call = f'"{fn}"' + (f", args=[{amount_expr}]" if amount_expr is not None else "")
    src = tx_script(n[pool], "RewardPool", [fn, "stakedBalance"], call, "0", pre)
    return (
        src.replace("\n\n\ndef execute_skill", src_extra + "\n\n\ndef execute_skill", 1) if src_extra else src
    )


def s_wrap(n: dict[str, str], amount: str) -> str:
    return s_call(n, "wrapped", "WETH9", ["deposit"], '"deposit"', f'w3.to_wei({amount!r}, "ether")')


def s_unwrap(n: dict[str, str], amount_expr: str) -> str:
    pre = "held = contract.functions.balanceOf(agent_address).call()"
    return s_call(
        n, "wrapped", "WETH9", ["withdraw", "balanceOf"], f'"withdraw", args=[{amount_expr}]', "0", pre
    )


def fields_expr(**fields: str) -> str:
    return "{" + ", ".join(f"{json.dumps(k)}: {e}" for k, e in fields.items()) + "}"


def q_balance(n: dict[str, str], token: str, field: str, who: str = "agent_address") -> str:
    return query_script(
        n[token],
        "LynnToken",
        ["balanceOf"],
        fields_expr(**{field: f"contract.functions.balanceOf({who}).call()"}),
    )


def q_native(field: str, who: str = "agent_address") -> str:
    return plain_script(f'return {{"query_result": {fields_expr(**{field: f"w3.eth.get_balance({who})"})}}}')


def q_view(n: dict[str, str], role: str, art: str, fn: str, field: str, args: str = "") -> str:
    return query_script(n[role], art, [fn], fields_expr(**{field: f"contract.functions.{fn}({args}).call()"}))


def q_quote(n: dict[str, str], p: dict[str, Any]) -> str:
    expr = f"contract.functions.getAmountsOut({wei_lit(p['amount'])}, {path_expr(n, p['path'])}).call()[-1]"
    return query_script(
        n["router"], "UniswapV2Router02", ["getAmountsOut"], fields_expr(expected_output=expr)
    )


def wei_lit(amount: str) -> str:
    return f'w3.to_wei({amount!r}, "ether")'


def comp(
    task_id: str,
    steps: Steps,
    checks: Callable[[Ctx], list[Check]],
    setup: Callable[[World, dict[str, Any]], None] | None = None,
    answer: AnswerSpec | None = None,
) -> None:
    COMPOSITES[task_id] = TaskLogic(
        script=lambda p, n: steps(p, n, {})[0],
        checks=checks,
        measure=measure_all,
        setup=setup or (lambda w, p: None),
        steps=steps,
        answer=answer,
    )


# ----------------------------------------------------------------------------- the 45 tasks
comp(
    "composite_add_liquidity_stake_lp",
    lambda p, n, b: [
        s_approve(n, "stable", "router"),
        s_add_eth(n, "stable", p["amount"]),
        s_approve(n, "pair_wrapped_stable", "lp_farm", art="UniswapV2Pair"),
        s_pool(
            n, "lp_farm", "deposit", f"held - {b.get('pair_wrapped_stable', 0)}", token="pair_wrapped_stable"
        ),
    ],
    lambda v: [
        c_true("lp_staked", 40, v.delta("lp_farm_staked") > 0, f"staked delta {v.delta('lp_farm_staked')}"),
        c_true(
            "all_new_lp_staked",
            30,
            v.delta("lp_farm_staked") > 0 and v.delta("pair_wrapped_stable") == 0,
            f"LP balance delta {v.delta('pair_wrapped_stable')}",
        ),
        c_close("native_deposited", 30, -(v.delta("native") + fees(v)), wei(v.params["amount"]), 0),
    ],
)
comp(
    "composite_approve_add_liquidity",
    lambda p, n, b: [
        s_approve(n, "stable", "router"),
        s_approve(n, "stable2", "router"),
        s_add_tokens(n, "stable", "stable2", p["amount"], False),
    ],
    lambda v: [
        c_true("lp_minted", 50, v.delta("pair_stable_stable2") > 0),
        c_close("stable_deposited", 25, -v.delta("stable"), wei(v.params["amount"]), 0),
        c_close("stable2_deposited", 25, -v.delta("stable2"), wei(v.params["amount"]), 0),
    ],
)
comp(
    "composite_approve_remove_liquidity",
    lambda p, n, b: [
        s_approve(n, "pair_wrapped_stable", "router", art="UniswapV2Pair"),
        s_remove(
            n,
            "pair_wrapped_stable",
            share("pair.functions.balanceOf(agent_address).call()", p["percent"]),
            True,
            "stable",
        ),
    ],
    lambda v: [
        c_close(
            "lp_burned",
            50,
            -v.delta("pair_wrapped_stable"),
            v.before["pair_wrapped_stable"] * int(v.params["percent"]) // 100,
        ),
        c_true("native_returned", 25, v.delta("native") + fees(v) > 0),
        c_true("stable_returned", 25, v.delta("stable") > 0),
    ],
)
comp(
    "composite_approve_stake_tokens",
    lambda p, n, b: [
        s_approve(n, "gov", "staking_pool"),
        s_pool(n, "staking_pool", "deposit", wei_lit(p["amount"])),
    ],
    lambda v: [
        c_close("staked", 70, v.delta("staking_pool_staked"), wei(v.params["amount"]), 0),
        c_all_ok(v, 30),
    ],
)
comp(
    "composite_approve_swap_query_result",
    lambda p, n, b: [
        s_approve(n, "stable", "router"),
        s_swap_tokens(n, ["stable", "stable2"], wei_lit(p["amount"])),
        q_balance(n, "stable2", "balance_after"),
    ],
    lambda v: [
        c_close("spent", 35, -v.delta("stable"), wei(v.params["amount"]), 0),
        c_close("received", 15, v.delta("stable2"), v.before["quote_out"], 2e-2),
        c_field(v, "balance_after", v.after["stable2"], 40),
        c_all_ok(v, 10),
    ],
    answer=answer_fields(amount_field("balance_after", "your {stable2} balance after the swap")),
)
comp(
    "composite_approve_swap_to_bnb",
    lambda p, n, b: [s_approve(n, p["path"][0], "router"), s_swap_to_eth(n, p["path"], p["amount"])],
    lambda v: [
        c_close("spent", 40, -v.delta(v.params["path"][0]), wei(v.params["amount"]), 0),
        c_close("native_received", 40, v.delta("native") + fees(v), v.before["quote_out"], 2e-2),
        c_all_ok(v, 20),
    ],
)
comp(
    "composite_approve_swap_tokens",
    lambda p, n, b: [s_approve(n, p["path"][0], "router"), s_swap_tokens(n, p["path"], wei_lit(p["amount"]))],
    lambda v: [
        c_close("spent", 40, -v.delta(v.params["path"][0]), wei(v.params["amount"]), 0),
        c_close("received", 40, v.delta(v.params["path"][-1]), v.before["quote_out"], 2e-2),
        c_all_ok(v, 20),
    ],
)
comp(
    "composite_approve_transferfrom",
    lambda p, n, b: [
        s_approve(n, "stable", AGENT.address, wei_lit(p["amount"])),
        s_call(
            n,
            "stable",
            "LynnToken",
            ["transferFrom"],
            f'"transferFrom", args=[agent_address, {p["recipient"]!r}, {wei_lit(p["amount"])}]',
        ),
    ],
    lambda v: [
        c_close("recipient_received", 50, v.delta("recipient_token"), wei(v.params["amount"]), 0),
        c_true(
            "used_transferfrom",
            30,
            bool(calls(v, "transferFrom(address,address,uint256)", ["address", "address", "uint256"])),
        ),
        c_all_ok(v, 20),
    ],
)
comp(
    "composite_batch_approve_2_tokens",
    lambda p, n, b: [
        s_approve(n, "stable", p["spender"], wei_lit(p["amount1"])),
        s_approve(n, "gov", p["spender"], wei_lit(p["amount2"])),
    ],
    lambda v: [
        c_close("allowance_1", 50, v.after["allowance_stable"], wei(v.params["amount1"]), 0),
        c_close("allowance_2", 50, v.after["allowance_gov"], wei(v.params["amount2"]), 0),
    ],
)
comp(
    "composite_batch_mixed_transfers",
    lambda p, n, b: [
        s_native(repr(p["r1"]), p["amount1"]),
        s_token_transfer(n, "stable", p["r2"], p["amount2"]),
    ],
    lambda v: [
        c_close("native_delivered", 50, v.delta("r1_native"), wei(v.params["amount1"]), 0),
        c_close("token_delivered", 50, v.delta("r2_token"), wei(v.params["amount2"]), 0),
    ],
)
comp(
    "composite_batch_query_2_balances",
    lambda p, n, b: [q_native("native_balance"), q_balance(n, p["token"], "token_balance")],
    lambda v: [
        c_field(v, "native_balance", v.after["native"], 50),
        c_field(v, "token_balance", v.after[v.params["token"]], 50),
    ],
    answer=answer_fields(
        amount_field("native_balance", "your {native} balance"),
        amount_field("token_balance", "your {token} balance"),
    ),
)
comp(
    "composite_batch_query_portfolio",
    lambda p, n, b: [
        q_native("native_balance"),
        q_balance(n, "wrapped", "wrapped_balance"),
        q_balance(n, "stable", "stable_balance"),
        q_balance(n, "gov", "gov_balance"),
    ],
    lambda v: [
        c_field(v, "native_balance", v.after["native"], 25),
        c_field(v, "wrapped_balance", v.after["wrapped"], 25),
        c_field(v, "stable_balance", v.after["stable"], 25),
        c_field(v, "gov_balance", v.after["gov"], 25),
    ],
    answer=answer_fields(
        amount_field("native_balance", "your {native} balance"),
        amount_field("wrapped_balance", "your {wrapped} balance"),
        amount_field("stable_balance", "your {stable} balance"),
        amount_field("gov_balance", "your {gov} balance"),
    ),
)


def _batch_native(k: int) -> None:
    keys = ["r1", "r2", "r3"][:k]
    comp(
        f"composite_batch_transfer_{k}_bnb",
        lambda p, n, b: [s_native(repr(p[r]), p[f"amount{i + 1}"]) for i, r in enumerate(keys)],
        lambda v: [
            c_close(
                f"{r}_received",
                100 // k + (100 % k if i == 0 else 0),
                v.delta(f"{r}_native"),
                wei(v.params[f"amount{i + 1}"]),
                0,
            )
            for i, r in enumerate(keys)
        ],
    )
    comp(
        f"composite_batch_transfer_{k}_tokens",
        lambda p, n, b: [
            s_token_transfer(n, p["token"], p[r], p[f"amount{i + 1}"]) for i, r in enumerate(keys)
        ],
        lambda v: [
            c_close(
                f"{r}_received",
                100 // k + (100 % k if i == 0 else 0),
                v.delta(f"{r}_token"),
                wei(v.params[f"amount{i + 1}"]),
                0,
            )
            for i, r in enumerate(keys)
        ],
    )


_batch_native(2)
_batch_native(3)

comp(
    "composite_complete_swap_stake_workflow",
    lambda p, n, b: [
        s_swap_eth(n, ["wrapped", "gov"], p["amount"]),
        s_approve(n, "gov", "staking_pool"),
        s_pool(n, "staking_pool", "deposit", f"held - {b.get('gov', 0)}", token="gov"),
    ],
    lambda v: [
        c_close("swapped_gov_staked", 50, v.delta("staking_pool_staked"), v.before["quote_out"], 2e-2),
        c_close("native_spent", 30, -(v.delta("native") + fees(v)), wei(v.params["amount"]), 0),
        c_all_ok(v, 20),
    ],
)
comp(
    "composite_emergency_exit_workflow",
    lambda p, n, b: [
        s_pool(n, "lp_farm", "emergencyWithdraw"),
        s_approve(n, "pair_wrapped_stable", "router", art="UniswapV2Pair"),
        s_remove(n, "pair_wrapped_stable", "pair.functions.balanceOf(agent_address).call()", True, "stable"),
    ],
    lambda v: [
        c_true("farm_exited", 30, v.after["lp_farm_staked"] == 0),
        c_true("lp_redeemed", 30, v.after["pair_wrapped_stable"] == 0),
        c_true("native_returned", 20, v.delta("native") + fees(v) > 0),
        c_true("stable_returned", 20, v.delta("stable") > 0),
    ],
)
comp(
    "composite_full_liquidity_cycle",
    lambda p, n, b: [
        s_approve(n, "stable", "router"),
        s_add_eth(n, "stable", p["amount"]),
        s_approve(n, "pair_wrapped_stable", "router", art="UniswapV2Pair"),
        s_remove(
            n,
            "pair_wrapped_stable",
            f"pair.functions.balanceOf(agent_address).call() - {b.get('pair_wrapped_stable', 0)}",
            True,
            "stable",
        ),
    ],
    lambda v: [
        c_true(
            "added_asked_amount",
            25,
            any(val == wei(v.params["amount"]) for val, _ in swaps_value(v, ADD_ETH)),
            f"addLiquidityETH values {[val for val, _ in swaps_value(v, ADD_ETH)]}",
        ),
        c_true(
            "removed",
            25,
            bool(
                calls(
                    v,
                    "removeLiquidityETH(address,uint256,uint256,uint256,address,uint256)",
                    ["address", "uint256", "uint256", "uint256", "address", "uint256"],
                )
            ),
        ),
        c_true("lp_back_to_start", 30, v.delta("pair_wrapped_stable") == 0),
        c_all_ok(v, 20),
    ],
)
comp(
    "composite_harvest_reinvest_workflow",
    lambda p, n, b: [
        s_pool(n, "staking_pool", "harvest"),
        s_approve(n, "gov", "staking_pool"),
        s_pool(n, "staking_pool", "deposit", f"held - {b.get('gov', 0)}", token="gov"),
    ],
    lambda v: [
        c_true(
            "harvested_and_restaked",
            50,
            v.delta("staking_pool_staked") >= v.before["staking_pool_pending"] > 0,
            f"staked +{v.delta('staking_pool_staked')}, pending was {v.before['staking_pool_pending']}",
        ),
        c_true(
            "gov_not_left_idle",
            20,
            v.delta("gov") < v.delta("staking_pool_staked"),
            f"gov delta {v.delta('gov')}",
        ),
        c_all_ok(v, 30),
    ],
)
comp(
    "composite_liquidity_provision_with_stake",
    lambda p, n, b: [
        s_wrap(n, p["amount"]),
        s_approve(n, "wrapped", "router", art="WETH9"),
        s_approve(n, "stable", "router"),
        s_add_tokens(n, "wrapped", "stable", p["amount"], True),
        s_approve(n, "pair_wrapped_stable", "lp_farm", art="UniswapV2Pair"),
        s_pool(
            n, "lp_farm", "deposit", f"held - {b.get('pair_wrapped_stable', 0)}", token="pair_wrapped_stable"
        ),
    ],
    lambda v: [
        c_true("lp_staked", 40, v.delta("lp_farm_staked") > 0),
        c_true("all_new_lp_staked", 20, v.delta("pair_wrapped_stable") == 0),
        c_close("wrapped_used", 20, -(v.delta("native") + fees(v)), wei(v.params["amount"]), 0),
        c_all_ok(v, 20),
    ],
)


def _multi_swap_checks(v: Ctx) -> list[Check]:
    swaps = calls(v, *SWAP_TT)
    stable, stable2 = v.addr("stable").lower(), v.addr("stable2").lower()
    first = any(
        s[0] == wei(v.params["amount1"]) and s[2][0].lower() == stable and s[2][-1].lower() == stable2
        for s in swaps
    )
    second = any(
        s[0] == wei(v.params["amount2"]) and s[2][0].lower() == stable2 and s[2][-1].lower() == stable
        for s in swaps
    )
    return [c_true("swap_1", 40, first), c_true("swap_2", 40, second), c_all_ok(v, 20)]


comp(
    "composite_multi_approve_multi_swap",
    lambda p, n, b: [
        s_approve(n, "stable", "router"),
        s_approve(n, "stable2", "router"),
        s_swap_tokens(n, ["stable", "stable2"], wei_lit(p["amount1"])),
        s_swap_tokens(n, ["stable2", "stable"], wei_lit(p["amount2"])),
    ],
    _multi_swap_checks,
)


def _multi_token_checks(v: Ctx) -> list[Check]:
    swaps = swaps_value(v, SWAP_ET)
    out = []
    for i, role in enumerate(("stable", "gov")):
        want = wei(v.params[f"amount{i + 1}"])
        ok = any(val == want and args[1][-1].lower() == v.addr(role).lower() for val, args in swaps)
        out.append(c_true(f"bought_{role}", 35, ok and v.delta(role) > 0))
    return [*out, c_all_ok(v, 30)]


comp(
    "composite_multi_token_swap",
    lambda p, n, b: [
        s_swap_eth(n, ["wrapped", "stable"], p["amount1"]),
        s_swap_eth(n, ["wrapped", "gov"], p["amount2"]),
    ],
    _multi_token_checks,
)
comp(
    "composite_nft_bundle_sale",
    lambda p, n, b: [
        s_call(
            n,
            "nft",
            "LynnNFT",
            ["transferFrom"],
            f'"transferFrom", args=[agent_address, {p["recipient"]!r}, {int(p[k])}]',
        )
        for k in ("id1", "id2")
    ],
    lambda v: [
        c_eq_addr("first_nft_delivered", 50, v.after["owner_id1"], v.params["recipient"]),
        c_eq_addr("second_nft_delivered", 50, v.after["owner_id2"], v.params["recipient"]),
    ],
)


def c_eq_addr(name: str, weight: int, got: str, want: str) -> Check:
    return Check(name, weight, str(got).lower() == str(want).lower(), f"got {got}, expected {want}")


comp(
    "composite_nft_transfer_with_payment",
    lambda p, n, b: [
        s_call(
            n,
            "nft",
            "LynnNFT",
            ["transferFrom"],
            f'"transferFrom", args=[agent_address, {p["recipient"]!r}, {int(p["token_id"])}]',
        ),
        s_native(repr(p["r1"]), p["amount"]),
    ],
    lambda v: [
        c_eq_addr("nft_delivered", 50, v.after["owner_token_id"], v.params["recipient"]),
        c_close("payment_sent", 50, v.delta("r1_native"), wei(v.params["amount"]), 0),
    ],
)


def _optimized_checks(v: Ctx) -> list[Check]:
    swaps = calls(v, *SWAP_TT)
    quote = v.before["quote_out"]
    floor = quote * (100 - int(v.params["slippage"])) // 100
    return [
        c_field(v, "expected_output", quote, 30),
        c_close("spent", 40, -v.delta(v.params["path"][0]), wei(v.params["amount"]), 0),
        c_true(
            "min_out_protects",
            30,
            any(s[1] >= floor * 999 // 1000 and s[1] <= quote for s in swaps),
            f"amountOutMin of swaps {[s[1] for s in swaps]}, floor {floor}",
        ),
    ]


comp(
    "composite_optimized_swap_with_query",
    lambda p, n, b: [
        q_quote(n, p),
        s_approve(n, p["path"][0], "router"),
        s_swap_tokens(n, p["path"], wei_lit(p["amount"]), 100 - int(p["slippage"])),
    ],
    _optimized_checks,
    answer=answer_fields(amount_field("expected_output", "the router's quoted output before swapping")),
)
comp(
    "composite_portfolio_rebalance",
    lambda p, n, b: [
        s_approve(n, "gov", "router"),
        s_swap_tokens(n, ["gov", "wrapped", "stable"], wei_lit(p["amount1"])),
        s_wrap(n, p["amount2"]),
    ],
    lambda v: [
        c_close("gov_sold", 35, -v.delta("gov"), wei(v.params["amount1"]), 0),
        c_true("stable_bought", 15, v.delta("stable") > 0),
        c_close("wrapped", 35, v.delta("wrapped"), wei(v.params["amount2"]), 0),
        c_all_ok(v, 15),
    ],
)
comp(
    "composite_query_allowance_approve_verify",
    lambda p, n, b: [
        q_view(n, "stable", "LynnToken", "allowance", "allowance_before", f"agent_address, {p['spender']!r}"),
        s_approve(n, "stable", p["spender"], wei_lit(p["amount1"])),
        q_view(n, "stable", "LynnToken", "allowance", "allowance_after", f"agent_address, {p['spender']!r}"),
    ],
    lambda v: [
        c_close("allowance_set", 50, v.after["allowance_stable"], wei(v.params["amount1"]), 0),
        c_field(v, "allowance_before", v.before["allowance_stable"], 20),
        c_field(v, "allowance_after", v.after["allowance_stable"], 30),
    ],
    answer=answer_fields(
        amount_field("allowance_before", "the allowance before your approval"),
        amount_field("allowance_after", "the allowance after it"),
    ),
)
comp(
    "composite_query_balance_wrap_verify",
    lambda p, n, b: [
        q_native("native_balance_before"),
        s_wrap(n, p["amount"]),
        q_balance(n, "wrapped", "wrapped_balance_after"),
    ],
    lambda v: [
        c_close("wrapped", 50, v.delta("wrapped"), wei(v.params["amount"]), 0),
        c_field(v, "native_balance_before", v.before["native"], 20),
        c_field(v, "wrapped_balance_after", v.after["wrapped"], 30),
    ],
    answer=answer_fields(
        amount_field("native_balance_before", "your {native} balance before wrapping"),
        amount_field("wrapped_balance_after", "your {wrapped} balance after it"),
    ),
)
comp(
    "composite_query_bnb_transfer_verify",
    lambda p, n, b: [
        q_native("balance_before"),
        s_native(repr(p["recipient"]), p["amount"]),
        q_native("recipient_balance_after", repr(p["recipient"])),
    ],
    lambda v: [
        c_close("delivered", 50, v.delta("recipient_native"), wei(v.params["amount"]), 0),
        c_field(v, "balance_before", v.before["native"], 20),
        c_field(v, "recipient_balance_after", v.after["recipient_native"], 30),
    ],
    answer=answer_fields(
        amount_field("balance_before", "your {native} balance before the transfer"),
        amount_field("recipient_balance_after", "the recipient's {native} balance after it"),
    ),
)
comp(
    "composite_query_erc20_transfer_verify",
    lambda p, n, b: [
        q_balance(n, p["token"], "balance_before"),
        s_token_transfer(n, p["token"], p["recipient"], p["amount"]),
        q_balance(n, p["token"], "recipient_balance_after", repr(p["recipient"])),
    ],
    lambda v: [
        c_close("delivered", 50, v.delta("recipient_token"), wei(v.params["amount"]), 0),
        c_field(v, "balance_before", v.before[v.params["token"]], 20),
        c_field(v, "recipient_balance_after", v.after["recipient_token"], 30),
    ],
    answer=answer_fields(
        amount_field("balance_before", "your {token} balance before the transfer"),
        amount_field("recipient_balance_after", "the recipient's {token} balance after it"),
    ),
)
comp(
    "composite_query_nft_transfer_verify",
    lambda p, n, b: [
        q_view(n, "nft", "LynnNFT", "ownerOf", "owner_before", str(int(p["token_id"]))),
        s_call(
            n,
            "nft",
            "LynnNFT",
            ["transferFrom"],
            f'"transferFrom", args=[agent_address, {p["recipient"]!r}, {int(p["token_id"])}]',
        ),
        q_view(n, "nft", "LynnNFT", "ownerOf", "owner_after", str(int(p["token_id"]))),
    ],
    lambda v: [
        c_eq_addr("delivered", 50, v.after["owner_token_id"], v.params["recipient"]),
        c_field(v, "owner_before", v.before["owner_token_id"], 20),
        c_field(v, "owner_after", v.after["owner_token_id"], 30),
    ],
    answer=answer_fields(
        ("owner_before", "the NFT's owner before the transfer, a 0x address"),
        ("owner_after", "its owner after it, a 0x address"),
    ),
)


def q_reserves(n: dict[str, str], when: str) -> str:
    return query_script(
        n["pair_stable_stable2"],
        "UniswapV2Pair",
        ["getReserves"],
        fields_expr(**{f"reserve0_{when}": "reserves[0]", f"reserve1_{when}": "reserves[1]"}),
        pre="reserves = contract.functions.getReserves().call()",
    )


comp(
    "composite_query_reserves_before_after_swap",
    lambda p, n, b: [
        q_reserves(n, "before"),
        s_approve(n, "stable", "router"),
        s_swap_tokens(n, ["stable", "stable2"], wei_lit(p["amount"])),
        q_reserves(n, "after"),
    ],
    lambda v: [
        c_field(v, "reserve0_before", v.before["reserves_stable_stable2"][0], 10),
        c_field(v, "reserve1_before", v.before["reserves_stable_stable2"][1], 10),
        c_field(v, "reserve0_after", v.after["reserves_stable_stable2"][0], 10),
        c_field(v, "reserve1_after", v.after["reserves_stable_stable2"][1], 10),
        c_close("swapped", 50, -v.delta("stable"), wei(v.params["amount"]), 0),
        c_all_ok(v, 10),
    ],
    answer=answer_fields(
        amount_field("reserve0_before", "the pair's token0 reserve before the swap"),
        amount_field("reserve1_before", "its token1 reserve before the swap"),
        amount_field("reserve0_after", "its token0 reserve after the swap"),
        amount_field("reserve1_after", "its token1 reserve after the swap"),
    ),
)
comp(
    "composite_query_rewards_harvest_verify",
    lambda p, n, b: [
        q_view(n, "lp_farm", "RewardPool", "pendingReward", "pending_before", "agent_address"),
        s_pool(n, "lp_farm", "harvest"),
        q_balance(n, "gov", "reward_balance_after"),
    ],
    lambda v: [
        c_true("harvested", 50, v.delta("gov") >= v.before["lp_farm_pending"] > 0),
        c_field(v, "pending_before", v.before["lp_farm_pending"], 20),
        c_field(v, "reward_balance_after", v.after["gov"], 30),
    ],
    answer=answer_fields(
        amount_field("pending_before", "the pending reward before harvesting"),
        amount_field("reward_balance_after", "your {gov} balance after it"),
    ),
)
comp(
    "composite_query_staked_stake_verify",
    lambda p, n, b: [
        q_view(n, "staking_pool", "RewardPool", "stakedBalance", "staked_before", "agent_address"),
        s_approve(n, "gov", "staking_pool"),
        s_pool(n, "staking_pool", "deposit", wei_lit(p["amount"])),
        q_view(n, "staking_pool", "RewardPool", "stakedBalance", "staked_after", "agent_address"),
    ],
    lambda v: [
        c_close("staked", 50, v.delta("staking_pool_staked"), wei(v.params["amount"]), 0),
        c_field(v, "staked_before", v.before["staking_pool_staked"], 20),
        c_field(v, "staked_after", v.after["staking_pool_staked"], 30),
    ],
    answer=answer_fields(
        amount_field("staked_before", "your stake before depositing"),
        amount_field("staked_after", "your stake after it"),
    ),
)
comp(
    "composite_query_swap_verify_output",
    lambda p, n, b: [
        q_quote(n, p),
        s_approve(n, p["path"][0], "router"),
        s_swap_tokens(n, p["path"], wei_lit(p["amount"])),
        q_balance(n, p["path"][-1], "balance_after"),
    ],
    lambda v: [
        c_field(v, "expected_output", v.before["quote_out"], 25),
        c_close("spent", 35, -v.delta(v.params["path"][0]), wei(v.params["amount"]), 0),
        c_close("received_quote", 20, v.delta(v.params["path"][-1]), v.before["quote_out"], 1e-3),
        c_field(v, "balance_after", v.after[v.params["path"][-1]], 20),
    ],
    answer=answer_fields(
        amount_field("expected_output", "the router's quoted output before swapping"),
        amount_field("balance_after", "your balance of the bought token after the swap"),
    ),
)
comp(
    "composite_remove_liquidity_unwrap",
    lambda p, n, b: [
        s_approve(n, "pair_wrapped_stable", "router", art="UniswapV2Pair"),
        s_remove(
            n,
            "pair_wrapped_stable",
            share("pair.functions.balanceOf(agent_address).call()", p["percent"]),
            False,
            "wrapped",
            "stable",
        ),
        s_unwrap(n, f"held - {b.get('wrapped', 0)}"),
    ],
    lambda v: [
        c_close(
            "lp_burned",
            30,
            -v.delta("pair_wrapped_stable"),
            v.before["pair_wrapped_stable"] * int(v.params["percent"]) // 100,
        ),
        c_true(
            "unwrapped",
            50,
            v.delta("wrapped") == 0 and v.delta("native") + fees(v) > 0,
            f"wrapped delta {v.delta('wrapped')}",
        ),
        c_all_ok(v, 20),
    ],
)


def _split_checks(v: Ctx) -> list[Check]:
    share = wei(v.params["amount"]) // 3
    return [
        *(c_close(f"{r}_share", 30, v.delta(f"{r}_token"), share, 0) for r in ("r1", "r2", "r3")),
        c_all_ok(v, 10),
    ]


comp(
    "composite_split_and_transfer",
    lambda p, n, b: [
        s_call(
            n,
            p["token"],
            "LynnToken",
            ["transfer"],
            f'"transfer", args=[{p[r]!r}, {wei_lit(p["amount"])} // 3]',
        )
        for r in ("r1", "r2", "r3")
    ],
    _split_checks,
)
comp(
    "composite_swap_approve_stake",
    lambda p, n, b: [
        s_approve(n, "stable", "router"),
        s_swap_tokens(n, ["stable", "wrapped", "gov"], wei_lit(p["amount"])),
        s_approve(n, "gov", "staking_pool"),
        s_pool(n, "staking_pool", "deposit", f"held - {b.get('gov', 0)}", token="gov"),
    ],
    lambda v: [
        c_close("stable_spent", 30, -v.delta("stable"), wei(v.params["amount"]), 0),
        c_close("swapped_gov_staked", 50, v.delta("staking_pool_staked"), v.before["quote_out"], 2e-2),
        c_all_ok(v, 20),
    ],
)
comp(
    "composite_swap_unwrap_bnb",
    lambda p, n, b: [
        s_approve(n, "stable", "router"),
        s_swap_tokens(n, ["stable", "wrapped"], wei_lit(p["amount"])),
        s_unwrap(n, f"held - {b.get('wrapped', 0)}"),
    ],
    lambda v: [
        c_close("stable_spent", 30, -v.delta("stable"), wei(v.params["amount"]), 0),
        c_true("no_wrapped_left", 30, v.delta("wrapped") == 0),
        c_close("native_received", 30, v.delta("native") + fees(v), v.before["quote_out"], 2e-2),
        c_all_ok(v, 10),
    ],
)
comp(
    "composite_triple_pool_liquidity",
    lambda p, n, b: [
        s_approve(n, "stable", "router"),
        s_approve(n, "gov", "router"),
        s_approve(n, "stable2", "router"),
        s_add_eth(n, "stable", p["amount1"]),
        s_add_eth(n, "gov", p["amount2"]),
        s_add_tokens(n, "stable", "stable2", p["amount3"], False),
    ],
    lambda v: _triple_checks(v),
)
comp(
    "composite_unstake_harvest_query",
    lambda p, n, b: [
        s_pool(n, "lp_farm", "withdraw", share("staked", p["percent"])),
        s_pool(n, "lp_farm", "harvest"),
        q_balance(n, "gov", "reward_balance_after"),
    ],
    lambda v: [
        c_close(
            "unstaked",
            50,
            -v.delta("lp_farm_staked"),
            v.before["lp_farm_staked"] * int(v.params["percent"]) // 100,
        ),
        c_true(
            "rewards_claimed",
            20,
            v.after["lp_farm_pending"] < v.before["lp_farm_pending"] and v.delta("gov") > 0,
        ),
        c_field(v, "reward_balance_after", v.after["gov"], 20),
        c_all_ok(v, 10),
    ],
    answer=answer_fields(amount_field("reward_balance_after", "your {gov} balance after harvesting")),
)
comp(
    "composite_wrap_add_liquidity",
    lambda p, n, b: [
        s_wrap(n, p["amount"]),
        s_approve(n, "wrapped", "router", art="WETH9"),
        s_approve(n, "stable", "router"),
        s_add_tokens(n, "wrapped", "stable", p["amount"], True),
    ],
    lambda v: [
        c_true("lp_minted", 50, v.delta("pair_wrapped_stable") > 0),
        c_close("native_used", 30, -(v.delta("native") + fees(v)), wei(v.params["amount"]), 0),
        c_all_ok(v, 20),
    ],
)
comp(
    "composite_wrap_swap_wbnb",
    lambda p, n, b: [
        s_wrap(n, p["amount"]),
        s_approve(n, "wrapped", "router", art="WETH9"),
        s_swap_tokens(n, ["wrapped", p["path"][-1]], wei_lit(p["amount"])),
    ],
    lambda v: [
        c_true("wrapped_spent_in_swap", 20, v.delta("wrapped") == 0),
        c_close("native_wrapped", 20, -(v.delta("native") + fees(v)), wei(v.params["amount"]), 0),
        c_close("received", 40, v.delta(v.params["path"][-1]), v.before["quote_out"], 2e-2),
        c_all_ok(v, 20),
    ],
)


def _triple_checks(v: Ctx) -> list[Check]:
    adds = swaps_value(v, ADD_ETH)

    def added_eth(role: str, amount: str) -> bool:
        return any(val == wei(amount) and a[0].lower() == v.addr(role).lower() for val, a in adds)

    tokens = calls(v, *ADD_TT)
    stable, stable2 = v.addr("stable").lower(), v.addr("stable2").lower()
    want3 = wei(v.params["amount3"])
    added_tt = any(
        {a[0].lower(), a[1].lower()} == {stable, stable2} and want3 in (a[2], a[3]) for a in tokens
    )
    return [
        c_true(
            "wrapped_stable_lp",
            30,
            v.delta("pair_wrapped_stable") > 0 and added_eth("stable", v.params["amount1"]),
        ),
        c_true(
            "wrapped_gov_lp", 30, v.delta("pair_wrapped_gov") > 0 and added_eth("gov", v.params["amount2"])
        ),
        c_true("stable_stable2_lp", 30, v.delta("pair_stable_stable2") > 0 and added_tt),
        c_all_ok(v, 10),
    ]


def _cycle_checks(v: Ctx) -> list[Check]:
    deposit = selector("deposit()")
    wrapped = [
        t for t in v.txs if t.status == 1 and t.selector == deposit and t.value == wei(v.params["amount"])
    ]
    unwrapped = [a for a in calls(v, *WITHDRAW) if a[0] == wei(v.params["amount"])]
    return [
        c_true("wrapped", 40, bool(wrapped)),
        c_true("unwrapped", 40, bool(unwrapped)),
        c_true("back_to_start", 20, v.delta("wrapped") == 0),
    ]


comp(
    "composite_wrap_unwrap_cycle",
    lambda p, n, b: [s_wrap(n, p["amount"]), s_unwrap(n, wei_lit(p["amount"]))],
    _cycle_checks,
)
