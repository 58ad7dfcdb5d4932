"""``scoring="reference"``: EVM-QuestBench's own rules (public repository ``Amorth/bsc_quest_bench``).

Facts taken from the reference (weights, tolerances, thresholds, attempts, optimal steps, max
rounds, composite base score, pre-approvals), re-expressed over this env's measured state; no
code or text of the reference is copied. Its loopholes are kept on purpose so that scores are
comparable with published numbers (each is listed in :data:`LOOPHOLES` and in
``docs/evmquest-fidelity.md``).

* **Atomic tasks**: one generation and one execution (``max_steps = 1``). A ported validator
  (:data:`ATOMIC`) gives ``score`` = sum of the weights of its passing checks and ``success``
  by its own rule (every check, or a score threshold). A failed transaction ends its validation
  early with score 0 where the reference does. Tasks not yet ported (see :func:`is_ported`)
  keep this env's default checks under the reference's attempt count; ``info["reference_port"]``
  says which applies.
* **Composite tasks**: the reference controller's rules, for all 45 tasks: effective optimal
  steps from the task's ``interaction_config`` (3 when absent), max rounds = optimal × its
  multiplier (2 when absent); base score 100 when any transaction was sent (its status is not
  looked at), for all-query composites the share of the expected queries answered; decay
  ``optimal / rounds`` beyond the optimum; success = final score ≥ 60. Allowances the reference
  sets before a composite starts are set here too (:data:`PRE_APPROVALS`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from lynn.envs.evmquest.taskkit import (
    Check,
    Ctx,
    path_expr,
    plain_script,
    query_script,
    selector,
    tx_calls,
    tx_ok,
    tx_script,
    tx_to,
    wei,
)
from lynn.envs.evmquest.world import AGENT, MAX_UINT, ROLE_ARTIFACT, World, abi_encode, function_abi

# (optimal steps, max-rounds multiplier) where the reference's interaction_config sets them.
COMPOSITE_STEPS: dict[str, tuple[int, int]] = {
    "composite_complete_swap_stake_workflow": (6, 2),
    "composite_emergency_exit_workflow": (5, 2),
    "composite_full_liquidity_cycle": (5, 2),
    "composite_harvest_reinvest_workflow": (5, 2),
    "composite_liquidity_provision_with_stake": (6, 2),
    "composite_multi_approve_multi_swap": (5, 2),
    "composite_nft_bundle_sale": (5, 2),
    "composite_optimized_swap_with_query": (5, 2),
    "composite_portfolio_rebalance": (5, 2),
    "composite_query_allowance_approve_verify": (2, 2),
    "composite_query_bnb_transfer_verify": (2, 2),
    "composite_query_erc20_transfer_verify": (2, 2),
    "composite_triple_pool_liquidity": (6, 2),
}
DEFAULT_COMPOSITE_STEPS = (3, 2)  # the controller's fallback when interaction_config is absent
# Composites whose atomic operations are all queries: scored by the rounds that succeeded.
PURE_QUERY = {"composite_batch_query_2_balances": 2, "composite_batch_query_portfolio": 3}
# Allowances the reference controller sets before these composites start: (token role or
# path index, spender role or "agent", multiple of the amount parameter or None for unlimited).
PRE_APPROVALS: dict[str, list[tuple[str, str, float | None]]] = {
    "composite_approve_transferfrom": [("stable", "agent", 2.0)],
    "composite_approve_swap_tokens": [("path0", "router", 2.0)],
    "composite_approve_add_liquidity": [("stable", "router", 2.0), ("stable2", "router", 2.0)],
    "composite_approve_stake_tokens": [("gov", "staking_pool", 2.0)],
    "composite_approve_remove_liquidity": [("pair_wrapped_stable", "router", None)],
    "composite_approve_swap_to_bnb": [("path0", "router", 2.0)],
}

LOOPHOLES = [
    "composite: any sent transaction gives base score 100, whatever it did and even if it reverted",
    "composite: the approve steps of composite_approve_* tasks may be skipped (the allowance is pre-set)",
    "composite: all-query composites count answers, not their values",
    "atomic thresholds (score >= 80) pass with a check failed: e.g. erc20_transfer_fixed with the wrong"
    " function selector, erc721_transfer by safeTransferFrom, wbnb_deposit with the balance check failed",
    "atomic amounts within 0.1% pass (bnb_transfer_basic, bnb_transfer_percentage, wbnb_*)",
    "queries: constant answers pass where genesis fixes the answer (no hidden per-episode state)",
]


def composite_steps(task_id: str) -> tuple[int, int]:
    """(optimal steps, max rounds) of a composite under the reference's rules."""
    optimal, multiplier = COMPOSITE_STEPS.get(task_id, DEFAULT_COMPOSITE_STEPS)
    return optimal, optimal * multiplier


def max_steps(task_id: str, split: str) -> int:
    return 1 if split == "atomic" else composite_steps(task_id)[1]


# ----------------------------------------------------------------------------- rules every ported validator shares


@dataclass(frozen=True)
class RefTask:
    """A ported reference validator: weighted checks, a status gate and a pass rule."""

    checks: Callable[[Ctx], list[Check]]
    threshold: int | None = None  # None: every check must pass
    gated: bool = True  # a failed transaction ends validation with score 0
    query: RefQuery | None = None  # a query validator (its own scoring, see :func:`_score_query`)
    share_score: bool = False  # score = 100 x the share of checks passed (remove_liquidity_*)


def _gas_limit(v: Ctx) -> int:
    return v.tx.gas_limit if v.tx is not None else 0


def _within(got: int, want: int, rel: float) -> bool:
    return abs(got - want) <= int(want * rel)


ZERO = "0x" + "00" * 20


def _word(v: Ctx, index: int, signature: str) -> int | None:
    """The ``index``-th 32-byte argument of the transaction when it calls ``signature``."""
    tx = v.tx
    if tx is None or tx.selector != selector(signature):
        return None
    start = 10 + 64 * index
    chunk = tx.data[start : start + 64]
    if len(chunk) < 64:
        return None
    return int(chunk, 16)


def _arg_address(v: Ctx, index: int, signature: str) -> str | None:
    word = _word(v, index, signature)
    return None if word is None else "0x" + hex(word)[2:].rjust(40, "0")[-40:]


def _tol(amount: int, rel: float = 0.001, floor: int = 1) -> int:
    return max(int(amount * rel), floor)


def _value(v: Ctx) -> int:
    return v.tx.value if v.tx is not None else 0


def _fee(v: Ctx) -> int:
    return v.tx.fee if v.tx is not None else 0


ATOMIC: dict[str, RefTask] = {}  # task id -> its ported validator, filled family by family


# ----------------------------------------------------------------------------- native coin


def _native_transfer(v: Ctx, want: int, weights: tuple[int, int, int, int, int]) -> list[Check]:
    tx = v.tx
    value = tx.value if tx else 0
    gas_used = tx.gas_used if tx else 0
    spent = -v.delta("agent_native")
    fee = tx.fee if tx else 0
    w_status, w_to, w_value, w_gas, w_balance = weights
    return [
        Check("transaction_success", w_status, tx_ok(v)),
        Check("target_address", w_to, tx_to(v, v.params["recipient"])),
        Check("amount", w_value, _within(value, want, 0.001), f"value={value}, expected {want} (0.1%)"),
        Check("gas_settings", w_gas, gas_used >= 21_000 and gas_used <= _gas_limit(v) <= 500_000),
        Check("balance_change", w_balance, _within(spent, value + fee, 0.001), f"spent {spent}"),
    ]


def _max_native(v: Ctx) -> list[Check]:
    want = v.before["agent_native"] - _fee(v)
    return [
        Check("transaction_success", 30, tx_ok(v)),
        Check("recipient", 20, tx_to(v, v.params["recipient"])),
        Check(
            "max_amount", 30, abs(_value(v) - want) <= _tol(want, floor=1000), f"sent {_value(v)}, max {want}"
        ),
        Check("balance_minimal", 20, v.after["agent_native"] <= 10**14, f"left {v.after['agent_native']}"),
    ]


def _native_to_contract(v: Ctx) -> list[Check]:
    want = wei(v.params["amount"])
    got = v.after["ref_target_native"] - v.before["ref_target_native"]
    return [
        Check("transaction_success", 30, tx_ok(v)),
        Check("contract_address", 20, tx_to(v, v.addr("fallback"))),  # a contract: it has code
        Check("amount", 30, _value(v) == want, f"value={_value(v)}, expected {want} exactly"),
        Check("contract_balance", 20, abs(got - want) <= _tol(want), f"contract received {got}"),
    ]


def _decoded_message(data: str) -> str | None:
    if not data or data == "0x":
        return None
    try:
        raw = bytes.fromhex(data[2:])
    except ValueError:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("ascii", errors="ignore")


def _native_with_message(v: Ctx) -> list[Check]:
    want = wei(v.params["amount"])
    message = v.params["message"]
    text = _decoded_message(v.tx.data if v.tx else "")
    found = text is not None and (message in text or text.strip() == message.strip())
    expected_after = v.before["agent_native"] - want - _fee(v)
    return [
        Check("transaction_success", 20, tx_ok(v)),
        Check("recipient", 20, tx_to(v, v.params["recipient"])),
        Check("amount", 20, _value(v) == want, f"value={_value(v)}, expected {want} exactly"),
        Check("message", 30, found, f"decoded {text!r}"),
        Check("balance", 10, abs(v.after["agent_native"] - expected_after) <= _tol(want)),
    ]


ATOMIC.update(
    {
        "bnb_transfer_basic": RefTask(
            lambda v: _native_transfer(v, wei(v.params["amount"]), (30, 25, 25, 10, 10)), gated=False
        ),
        "bnb_transfer_percentage": RefTask(
            lambda v: _native_transfer(
                v, v.before["agent_native"] * int(v.params["percent"]) // 100, (30, 20, 30, 10, 10)
            ),
            gated=False,
        ),
        "bnb_transfer_max_amount": RefTask(_max_native, threshold=80),
        "bnb_transfer_to_contract": RefTask(_native_to_contract, threshold=80),
        "bnb_transfer_with_message": RefTask(_native_with_message, threshold=80),
    }
)


# ----------------------------------------------------------------------------- wrapped native


def _wbnb_deposit(v: Ctx) -> list[Check]:
    want = wei(v.params["amount"])
    value = v.tx.value if v.tx else 0
    return [
        Check("transaction_success", 30, tx_ok(v)),
        Check("contract_address", 20, tx_to(v, v.addr("wrapped"))),
        Check("function_selector", 20, tx_calls(v, "deposit()")),
        Check("amount", 20, _within(value, want, 0.001)),
        Check("wrapped_balance", 10, _within(v.delta("agent_wrapped"), want, 0.001)),
    ]


def _wbnb_withdraw(v: Ctx) -> list[Check]:
    want = wei(v.params["amount"])
    fee = v.tx.fee if v.tx else 0
    native_after = v.after["agent_native"]
    return [
        Check("transaction_success", 30, tx_ok(v)),
        Check("contract_address", 20, tx_to(v, v.addr("wrapped"))),
        Check("function_selector", 20, tx_calls(v, "withdraw(uint256)")),
        Check("wrapped_balance", 15, _within(-v.delta("agent_wrapped"), want, 0.001)),
        Check(
            "native_balance",
            15,
            abs(native_after - (v.before["agent_native"] + want - fee)) <= int(want * 0.001),
        ),
    ]


ATOMIC.update(
    {
        "wbnb_deposit": RefTask(_wbnb_deposit, threshold=80),
        "wbnb_withdraw": RefTask(_wbnb_withdraw, threshold=80),
    }
)


# ----------------------------------------------------------------------------- ERC-20 and ERC-1363


def _erc20_transfer(v: Ctx) -> list[Check]:
    token = v.params.get("token", "stable")
    want = wei(v.params["amount"])
    return [
        Check("transaction_success", 30, tx_ok(v)),
        Check("contract_address", 20, tx_to(v, v.addr(token))),
        Check("function_selector", 20, tx_calls(v, "transfer(address,uint256)")),
        Check(
            "balance_changes",
            30,
            v.delta("agent_token") == -want and v.delta("recipient_token") == want,
            f"sender {v.delta('agent_token')}, receiver {v.delta('recipient_token')}, expected {want}",
        ),
    ]


def _erc20_share(v: Ctx) -> list[Check]:
    token = v.params.get("token", "stable")
    want = int(v.before["agent_token"] * int(v.params["percent"]) / 100)  # the reference's float share
    tol = int(want * 0.001)
    sent = -v.delta("agent_token")
    return [
        Check("transaction_success", 30, tx_ok(v)),
        Check("contract_address", 20, tx_to(v, v.addr(token))),
        Check("function_selector", 10, tx_calls(v, "transfer(address,uint256)")),
        Check("sender_amount", 30, abs(sent - want) <= tol, f"sent {sent}, expected {want} (0.1%)"),
        Check("receiver_amount", 10, abs(v.delta("recipient_token") - want) <= tol),
    ]


def _erc20_max(v: Ctx) -> list[Check]:
    token = v.params.get("token", "stable")
    want = v.before["agent_token"]
    sent = -v.delta("agent_token")
    return [
        Check("transaction_success", 30, tx_ok(v)),
        Check("contract_address", 20, tx_to(v, v.addr(token))),
        Check("function_selector", 10, tx_calls(v, "transfer(address,uint256)")),
        Check("max_amount", 20, abs(sent - want) <= _tol(want), f"sent {sent} of {want}"),
        Check("balance_minimal", 20, v.after["agent_token"] <= 10**16),
    ]


def _allowance_set(v: Ctx, signature: str, mode: str) -> list[Check]:
    """approve / increaseAllowance / decreaseAllowance: the allowance moves by the amount *sent*.

    The reference compares the allowance with the amount decoded from the transaction (the
    instructed amount only when it cannot decode one), so a wrong amount or spender passes.
    """
    sent = _word(v, 1, signature)
    amount = sent if sent is not None else wei(v.params["amount"])
    if mode == "set":
        ok = v.after["allowance"] == amount
    elif mode == "increase":
        ok = v.delta("allowance") == amount
    else:
        ok = -v.delta("allowance") == amount
    return [
        Check("transaction_success", 30, tx_ok(v)),
        Check("function_selector", 20, tx_calls(v, signature)),
        Check(
            "allowance", 40, ok, f"allowance {v.before['allowance']} -> {v.after['allowance']}, sent {amount}"
        ),
        Check("no_token_transfer", 10, v.delta("agent_token") == 0),
    ]


def _revoke(v: Ctx) -> list[Check]:
    token = v.params.get("token", "stable")
    return [
        Check("transaction_success", 30, tx_ok(v)),
        Check("contract_address", 20, tx_to(v, v.addr(token))),
        Check("function_selector", 20, tx_calls(v, "approve(address,uint256)")),
        Check("allowance_revoked", 30, v.after["allowance"] == 0),
    ]


def _burn(v: Ctx) -> list[Check]:
    """The reference expects a transfer to the zero address (20); burn() earns 80, which passes."""
    want = wei(v.params["amount"])
    burned = -v.delta("agent_token")
    return [
        Check("transaction_success", 30, tx_ok(v)),
        Check("contract_address", 20, tx_to(v, v.addr(v.params["token"]))),
        Check("transfer_to_zero", 20, _arg_address(v, 0, "transfer(address,uint256)") == ZERO),
        Check("balance_decrease", 30, abs(burned - want) <= (int(want * 0.001) or 1), f"burned {burned}"),
    ]


def _around_last_tx(v: Ctx, role: str, fn: str, *args: Any) -> int | None:
    """How much view ``fn(*args)`` of ``role`` changed over the last transaction (its block against the
    one before: the reference's state snapshots just before and after it), or ``None`` if unreadable."""

    tx = v.tx
    if tx is None or not tx.tx_hash:
        return None
    try:
        chain = v.world.chain
        block = int(str(chain.raw_request("eth_getTransactionReceipt", [tx.tx_hash])["blockNumber"]), 0)
        inputs, _, sel = function_abi(ROLE_ARTIFACT[role], fn, len(args))
        call = {"to": v.world.addresses[role], "data": "0x" + sel + abi_encode(inputs, list(args)).hex()}
        before, after = (
            int(str(chain.raw_request("eth_call", [call, hex(b)])), 16) for b in (block - 1, block)
        )
    except (AttributeError, KeyError, TypeError, ValueError, RuntimeError):
        return None
    return after - before


def _transfer_from(v: Ctx) -> list[Check]:
    """The reference decodes from, to and amount from the calldata and tracks those addresses' balances
    and the from -> agent allowance around the transaction, so another recipient (or amount) that the
    allowance covers passes there; only a calldata it cannot decode falls back to the instructed ones."""
    signature = "transferFrom(address,address,uint256)"
    sent = _word(v, 2, signature)
    decoded = sent is not None and len(v.tx.data if v.tx else "") >= 202
    amount = sent if decoded else wei(v.params["amount"])
    tol = amount * 0.001
    owner, recipient = v.params["owner"], v.params["recipient"]
    spent, debited, credited = -v.delta("allowance"), -v.delta("friend_token"), v.delta("recipient_token")
    if decoded:
        owner, recipient = _arg_address(v, 0, signature), _arg_address(v, 1, signature)
        from eth_utils import to_checksum_address

        owner, recipient = to_checksum_address(owner), to_checksum_address(recipient)
        allowance = _around_last_tx(v, "stable", "allowance", owner, AGENT.address)
        from_change = _around_last_tx(v, "stable", "balanceOf", owner)
        to_change = _around_last_tx(v, "stable", "balanceOf", recipient)
        if None not in (allowance, from_change, to_change):
            spent, debited, credited = -allowance, -from_change, to_change  # type: ignore[operator]
    return [
        Check("transaction_success", 20, tx_ok(v)),
        Check("function_selector", 20, tx_calls(v, signature)),
        Check("allowance_spent", 20, abs(spent - amount) <= tol),
        Check("owner_debited", 20, abs(debited - amount) <= tol, f"{owner} debited {debited}"),
        Check("recipient_credited", 20, abs(credited - amount) <= tol, f"{recipient} credited {credited}"),
    ]


def _transfer_and_call(v: Ctx) -> list[Check]:
    want = wei(v.params["amount"])
    return [
        Check("transaction_success", 30, tx_ok(v)),
        Check("sender_decrease", 40, -v.delta("agent_token") == want),
        Check("receiver_increase", 20, v.delta("ref_receiver_token") == want),
        Check("function_selector", 10, tx_calls(v, "transferAndCall(address,uint256)")),
    ]


def _approve_and_call(v: Ctx) -> list[Check]:
    sigs = ("approveAndCall(address,uint256)", "approveAndCall(address,uint256,bytes)")
    return [
        Check("transaction_success", 30, tx_ok(v)),
        Check("allowance", 50, v.after["allowance"] == wei(v.params["amount"])),
        Check("function_selector", 20, any(tx_calls(v, s) for s in sigs)),
    ]


ATOMIC.update(
    {
        "erc20_transfer_fixed": RefTask(_erc20_transfer, threshold=80),
        "erc20_permit": RefTask(
            lambda v: [
                Check("transaction_success", 40, tx_ok(v)),
                Check("allowance", 60, v.after["allowance"] == wei(v.params["amount"])),
            ]
        ),
        "erc20_transfer_percentage": RefTask(_erc20_share, threshold=80),
        "erc20_transfer_max_amount": RefTask(_erc20_max, threshold=80),
        "erc20_approve": RefTask(lambda v: _allowance_set(v, "approve(address,uint256)", "set")),
        "erc20_increase_allowance": RefTask(
            lambda v: _allowance_set(v, "increaseAllowance(address,uint256)", "increase")
        ),
        "erc20_decrease_allowance": RefTask(
            lambda v: _allowance_set(v, "decreaseAllowance(address,uint256)", "decrease")
        ),
        "erc20_revoke_approval": RefTask(_revoke, threshold=80),
        "erc20_burn": RefTask(_burn, threshold=80),
        "erc20_transferfrom_basic": RefTask(_transfer_from),
        "erc20_transfer_with_callback_1363": RefTask(_transfer_and_call),
        "erc20_approve_and_call_1363": RefTask(_approve_and_call),
    }
)


# ----------------------------------------------------------------------------- NFTs: ERC-721 and ERC-1155


def _erc721_transfer(v: Ctx) -> list[Check]:
    return [
        Check("transaction_success", 30, tx_ok(v)),
        Check("contract_address", 20, tx_to(v, v.addr("nft"))),
        Check("function_selector", 20, tx_calls(v, "transferFrom(address,address,uint256)")),
        Check("ownership", 30, str(v.after["owner"]).lower() == str(v.params["recipient"]).lower()),
    ]


def _nft_checks(signature: str, state: str, weights: tuple[int, int, int]) -> Callable[[Ctx], list[Check]]:
    """ERC-721 approve / setApprovalForAll / safeTransferFrom: status, resulting state, selector."""

    def checks(v: Ctx) -> list[Check]:
        if state == "approved":
            ok = str(v.after["approved"]).lower() == str(v.params["spender"]).lower()
        elif state == "for_all":
            ok = v.after["for_all"] is True
        else:
            ok = str(v.after["owner"]).lower() == str(v.params["recipient"]).lower()
        return [
            Check("transaction_success", weights[0], tx_ok(v)),
            Check(state, weights[1], ok),
            Check("function_selector", weights[2], tx_calls(v, signature)),
        ]

    return checks


def _erc1155(with_data: bool) -> Callable[[Ctx], list[Check]]:
    def checks(v: Ctx) -> list[Check]:
        n = int(v.params["amount"])
        moved = -v.delta("agent_items") == n and v.delta("recipient_items") == n
        sel = "safeTransferFrom(address,address,uint256,uint256,bytes)"
        out = [
            Check("transaction_success", 30, tx_ok(v)),
            Check("contract_address", 15 if with_data else 20, tx_to(v, v.addr("multi"))),
            Check("function_selector", 15 if with_data else 20, tx_calls(v, sel)),
        ]
        if with_data:  # the reference only asks for calldata longer than 200 hex digits
            data = v.tx.data if v.tx is not None else ""
            out.append(Check("data_attached", 10, len(data[2:] if data.startswith("0x") else data) > 200))
        return [*out, Check("balances", 30, moved)]

    return checks


ATOMIC.update(
    {
        "erc721_transfer": RefTask(_erc721_transfer, threshold=80),
        "erc721_approve": RefTask(_nft_checks("approve(address,uint256)", "approved", (30, 50, 20))),
        "erc721_set_approval_for_all": RefTask(
            _nft_checks("setApprovalForAll(address,bool)", "for_all", (30, 50, 20))
        ),
        "erc721_safe_transfer": RefTask(
            _nft_checks("safeTransferFrom(address,address,uint256)", "owner", (30, 40, 30))
        ),
        "erc1155_transfer_single": RefTask(_erc1155(False)),
        "erc1155_safe_transfer_with_data": RefTask(_erc1155(True)),
    }
)


# ----------------------------------------------------------------------------- plain contract calls


def _contract_call_simple(v: Ctx) -> list[Check]:
    return [
        Check("transaction_success", 40, tx_ok(v)),
        Check("contract_address", 20, tx_to(v, v.addr("counter"))),
        Check("function_selector", 20, tx_calls(v, "increment()")),
        Check("counter_increased", 20, v.delta("count") == 1),
    ]


def _call_with_params(v: Ctx) -> list[Check]:
    return [
        Check("transaction_success", 40, tx_ok(v)),
        Check("contract_address", 20, tx_to(v, v.addr("board"))),
        Check(
            "function_selector", 20, tx_calls(v, "setMessage(string)"), "the reference's setMessage(string)"
        ),
        Check("message_stored", 20, v.after["message"] == v.params["message"]),
    ]


def _call_with_value(v: Ctx) -> list[Check]:
    want = wei(v.params["amount"])
    got = v.after["ref_target_native"] - v.before["ref_target_native"]
    return [
        Check("transaction_success", 30, tx_ok(v)),
        Check("contract_address", 20, tx_to(v, v.addr("donation"))),
        Check("function_selector", 20, tx_calls(v, "donate()")),
        Check("value", 15, abs(_value(v) - want) <= 1),
        Check("contract_balance", 15, abs(got - want) <= 1, f"contract +{got}"),
    ]


ATOMIC.update(
    {
        "contract_call_simple": RefTask(_contract_call_simple),
        "contract_call_with_params": RefTask(_call_with_params),
        "contract_call_with_value": RefTask(_call_with_value),
    }
)


# ----------------------------------------------------------------------------- staking


def _full_arg(v: Ctx) -> int | None:
    """The reference reads a staking amount as every hex digit after the selector."""
    data = v.tx.data if v.tx is not None else ""
    if not (isinstance(data, str) and data.startswith("0x") and len(data) >= 74):
        return None
    try:
        return int(data[10:], 16)
    except ValueError:
        return None


def _stake_single(v: Ctx) -> list[Check]:
    decoded = _full_arg(v)
    amount = decoded if decoded is not None else wei(v.params["amount"])
    spent = -v.delta("agent_stake_token")
    staked = v.delta("staked")
    return [
        Check("transaction_success", 25, tx_ok(v)),
        Check("approval", 20, True, "always passes in the reference (allowance_after >= 0)"),
        Check(
            "balance_decrease",
            25,
            spent > 0 and abs(spent - amount) <= amount * 0.001,
            f"spent {spent} of {amount}",
        ),
        Check("staked_increase", 30, staked > 0 and abs(staked - spent) <= spent * 0.01, f"staked +{staked}"),
    ]


def _stake_lp(v: Ctx) -> list[Check]:
    spent = -v.delta("agent_stake_token")
    staked = v.delta("staked")
    return [
        Check("transaction_success", 25, tx_ok(v)),
        Check("approval", 20, True, "always passes in the reference (lp_allowance_after >= 0)"),
        Check("lp_balance_decrease", 25, spent > 0, f"LP spent {spent}"),
        Check("staked_increase", 30, staked > 0 and abs(staked - spent) <= spent * 0.01, f"staked +{staked}"),
    ]


def _unstake(v: Ctx) -> list[Check]:
    sent = _word(v, 0, "withdraw(uint256)") if v.tx is not None and len(v.tx.data) >= 74 else None
    if sent is None and v.tx is not None and len(v.tx.data) >= 74:
        try:
            sent = int(v.tx.data[10:74], 16)
        except ValueError:
            sent = None
    amount = sent if sent is not None else v.before["staked"] * int(v.params["percent"]) // 100
    tol = amount * 0.01
    back, unstaked = v.delta("agent_stake_token"), -v.delta("staked")
    return [
        Check("transaction_success", 30, tx_ok(v)),
        Check(
            "lp_returned", 40, back > 0 and abs(back - amount) <= tol, f"LP back {back}, withdrew {amount}"
        ),
        Check("staked_decrease", 30, unstaked > 0 and abs(unstaked - amount) <= tol, f"unstaked {unstaked}"),
    ]


def _harvest(v: Ctx) -> list[Check]:
    return [
        Check("transaction_success", 30, tx_ok(v)),
        Check("rewards_received", 70, v.delta("agent_gov") > 0, f"reward token +{v.delta('agent_gov')}"),
    ]


def _emergency(v: Ctx) -> list[Check]:
    staked = v.before["staked"]
    back = v.delta("agent_stake_token")
    reward = v.delta("agent_gov")  # the reward token; the LP farm (the reference's pool) stakes LP
    return [
        Check("transaction_success", 30, tx_ok(v)),
        Check("lp_returned", 40, abs(back - staked) <= staked * 0.01, f"back {back} of {staked} staked"),
        Check("record_cleared", 20, v.after["staked"] == 0),
        Check("rewards_forfeited", 10, abs(reward) < 10**15, f"reward token {reward:+d}"),
    ]


ATOMIC.update(
    {
        "stake_single_token": RefTask(_stake_single),
        "stake_lp_tokens": RefTask(_stake_lp),
        "unstake_lp_tokens": RefTask(_unstake),
        "harvest_rewards": RefTask(_harvest),
        "emergency_withdraw": RefTask(_emergency),
    }
)


# ----------------------------------------------------------------------------- DEX: swaps and liquidity


ROUTER_SIGS = {
    "swap_exact_bnb_for_tokens": "swapExactETHForTokens(uint256,address[],address,uint256)",
    "swap_exact_tokens_for_bnb": "swapExactTokensForETH(uint256,uint256,address[],address,uint256)",
    "swap_exact_tokens_for_tokens": "swapExactTokensForTokens(uint256,uint256,address[],address,uint256)",
    "swap_multihop_routing": "swapExactTokensForTokens(uint256,uint256,address[],address,uint256)",
    "swap_tokens_for_exact_tokens": "swapTokensForExactTokens(uint256,uint256,address[],address,uint256)",
    "add_liquidity_bnb_token": "addLiquidityETH(address,uint256,uint256,uint256,address,uint256)",
    "add_liquidity_tokens": "addLiquidity(address,address,uint256,uint256,uint256,uint256,address,uint256)",
    "remove_liquidity_bnb_token": "removeLiquidityETH(address,uint256,uint256,uint256,address,uint256)",
    "remove_liquidity_tokens": "removeLiquidity(address,address,uint256,uint256,uint256,address,uint256)",
}


def _router(v: Ctx, task_id: str) -> tuple[bool, bool]:
    return tx_to(v, v.addr("router")), tx_calls(v, ROUTER_SIGS[task_id])


def _io(v: Ctx) -> tuple[str, str]:
    path = [str(r) for r in v.params["path"]]
    return path[0], path[-1]


def _native_received(v: Ctx) -> int:
    return v.delta("agent_native") + _fee(v)


def _swap_bnb_in(v: Ctx) -> list[Check]:
    to, sel = _router(v, "swap_exact_bnb_for_tokens")
    want = wei(v.params["amount"])
    out = v.delta(f"agent_{_io(v)[1]}")
    return [
        Check("transaction_success", 30, tx_ok(v)),
        Check("router", 15, to),
        Check("function_selector", 15, sel),
        Check("value", 15, _value(v) == want, f"value {_value(v)}, expected {want} exactly"),
        Check("token_received", 25, out > 0, f"+{out}"),
    ]


def _approval(v: Ctx, rule: str) -> bool:
    before, after = v.before["ref_allowance"], v.after["ref_allowance"]
    want = wei(v.params["amount"])
    if rule == "enough":
        return before >= want or after >= want or before - after >= want * 0.99
    return before > 0 or after > 0


def _swap_tokens_in(task_id: str) -> Callable[[Ctx], list[Check]]:
    def checks(v: Ctx) -> list[Check]:
        to, sel = _router(v, task_id)
        want = wei(v.params["amount"])
        tok_in, tok_out = _io(v)
        spent = -v.delta(f"agent_{tok_in}")
        to_native = task_id == "swap_exact_tokens_for_bnb"
        got = _native_received(v) if to_native else v.delta(f"agent_{tok_out}")
        return [
            Check("transaction_success", 30, tx_ok(v)),
            Check("approval", 20 if to_native else 15, _approval(v, "enough")),
            Check("router", 10, to),
            Check("function_selector", 10, sel),
            Check("amount_in", 20, abs(spent - want) < 10, f"spent {spent}, expected {want}"),
            Check("output_received", 10 if to_native else 15, got > 0, f"+{got}"),
        ]

    return checks


def _hops(v: Ctx) -> int:
    """Contracts other than the path's two ends that logged during the swap (pairs, hop tokens)."""
    if v.tx is None or len(v.tx.data) <= 10:
        return 0
    tok_in, tok_out = (v.addr(r).lower() for r in _io(v))
    seen = set()
    for log in v.tx.logs:
        address = str(log.get("address", "") if hasattr(log, "get") else "").lower()
        if address and address not in (tok_in, tok_out):
            seen.add(address)
    return len(seen)


def _multihop(v: Ctx) -> list[Check]:
    to, sel = _router(v, "swap_multihop_routing")
    tok_in, tok_out = _io(v)
    return [
        Check("transaction_success", 20, tx_ok(v)),
        Check("approval", 10, _approval(v, "any")),
        Check("router", 10, to),
        Check("function_selector", 10, sel),
        Check("amount_in", 20, -v.delta(f"agent_{tok_in}") == wei(v.params["amount"])),
        Check("output_received", 20, v.delta(f"agent_{tok_out}") > 0),
        Check("multi_hop", 10, _hops(v) >= 2, f"{_hops(v)} intermediaries logged"),
    ]


def _exact_out(v: Ctx) -> list[Check]:
    to, sel = _router(v, "swap_tokens_for_exact_tokens")
    tok_in, tok_out = _io(v)
    got = v.delta(f"agent_{tok_out}")
    return [
        Check("transaction_success", 30, tx_ok(v)),
        Check("approval", 15, _approval(v, "any")),
        Check("router", 10, to),
        Check("function_selector", 10, sel),
        Check("output_exact", 25, abs(got - wei(v.params["amount"])) <= 10, f"+{got}"),
        Check("input_spent", 10, -v.delta(f"agent_{tok_in}") > 0),
    ]


def _add_bnb(v: Ctx) -> list[Check]:
    to, sel = _router(v, "add_liquidity_bnb_token")
    want = wei(v.params["amount"])
    return [
        Check("transaction_success", 20, tx_ok(v)),
        Check("approval", 15, _approval(v, "any")),
        Check("router", 10, to),
        Check("function_selector", 10, sel),
        Check("native_sent", 20, abs(_value(v) - want) <= int(want * 0.01), f"value {_value(v)}"),
        Check("token_spent", 15, -v.delta("agent_stable") > 0),
        Check("lp_received", 10, v.delta("agent_pair_wrapped_stable") > 0),
    ]


def _add_tokens(v: Ctx) -> list[Check]:
    to, sel = _router(v, "add_liquidity_tokens")
    want = wei(v.params["amount"])
    lo, hi = int(want * 0.5), int(want * 1.5)
    return [
        Check("transaction_success", 30, tx_ok(v)),
        Check("token_a_approved", 10, v.before["ref_allowance"] > 0),
        Check("token_b_approved", 10, v.before["ref_allowance_b"] > 0),
        Check("router", 10, to),
        Check("function_selector", 5, sel),
        Check("token_a_spent", 15, lo <= -v.delta("agent_stable") <= hi, "within 50-150% of the amount"),
        Check("token_b_spent", 15, lo <= -v.delta("agent_stable2") <= hi, "within 50-150% of the amount"),
        Check("lp_received", 5, v.delta("agent_pair_stable_stable2") > 0),
    ]


def _remove(task_id: str) -> Callable[[Ctx], list[Check]]:
    def checks(v: Ctx) -> list[Check]:
        to, sel = _router(v, task_id)
        pair = v.params["pair"]
        burned = -v.delta(f"agent_{pair}")
        if task_id == "remove_liquidity_bnb_token":
            share = Decimal(v.before[f"agent_{pair}"]) * int(v.params["percent"]) / 100
            lp_ok = int(share * Decimal("0.99")) <= burned <= int(share * Decimal("1.01"))
            other = Check("native_received", 1, _native_received(v) > 0)
        else:
            lp_ok = burned > 0
            other = Check("token_b_received", 1, v.delta("agent_stable2") > 0)
        return [
            Check("transaction_success", 1, tx_ok(v)),
            Check("lp_approved", 1, v.before["ref_lp_allowance"] > 0 or v.after["ref_lp_allowance"] > 0),
            Check("router", 1, to),
            Check("function_selector", 1, sel),
            Check("lp_burned", 1, lp_ok, f"burned {burned}"),
            Check("token_received", 1, v.delta("agent_stable") > 0),
            other,
        ]

    return checks


ATOMIC.update(
    {
        "swap_exact_bnb_for_tokens": RefTask(_swap_bnb_in),
        "swap_exact_tokens_for_bnb": RefTask(_swap_tokens_in("swap_exact_tokens_for_bnb")),
        "swap_exact_tokens_for_tokens": RefTask(_swap_tokens_in("swap_exact_tokens_for_tokens")),
        "swap_multihop_routing": RefTask(_multihop, threshold=80),
        "swap_tokens_for_exact_tokens": RefTask(_exact_out),
        "add_liquidity_bnb_token": RefTask(_add_bnb, threshold=70),
        "add_liquidity_tokens": RefTask(_add_tokens, threshold=70, gated=False),
        "remove_liquidity_bnb_token": RefTask(_remove("remove_liquidity_bnb_token"), share_score=True),
        "remove_liquidity_tokens": RefTask(_remove("remove_liquidity_tokens"), share_score=True),
    }
)


# ----------------------------------------------------------------------------- queries


def _query_field(field: str) -> Callable[[Ctx], list[Check]]:
    """The reference's balance queries: answered (30), the named field present (30), exact (40)."""

    def checks(v: Ctx) -> list[Check]:
        answer = v.answers[-1] if v.answers else None
        has = isinstance(answer, dict) and field in answer
        got = answer.get(field) if has else None  # type: ignore[union-attr]
        try:
            value = int(got, 16) if isinstance(got, str) and got.startswith("0x") else int(got)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            value = None
        return [
            Check("query_success", 30, answer is not None),
            Check("format", 30, has, f"expected a {field!r} field"),
            Check("value", 40, has and value == v.after["truth"], f"got {got}, expected {v.after['truth']}"),
        ]

    return checks


def _answer_data(v: Ctx) -> tuple[bool, dict[str, Any]]:
    """(query succeeded, its data) as the reference sees them: the last answer, a dict or nothing."""
    if not v.answers:
        return False, {}
    answer = v.answers[-1]
    return True, answer if isinstance(answer, dict) else {}


def _as_int(raw: Any) -> int | None:
    """The reference's ``int(x)``: decimal strings and numbers (no hex), ``None`` where it raises."""
    try:
        return int(raw)
    except (TypeError, ValueError):
        return None


def _graded(got: int | None, want: int, within_pct: float, slope_pct: float, weight: int) -> int:
    """Full weight within ``within_pct`` %, then linear down to 0 at ``slope_pct`` % off."""
    if got is None:
        return 0
    diff = abs(got - want) / want * 100 if want > 0 else (0 if got == 0 else 100)
    if diff <= within_pct:
        return weight
    return max(0, int(weight * (1 - diff / slope_pct)))


@dataclass(frozen=True)
class RefQuery:
    """A reference query validator: success / fields / value weights, scored by ``value``."""

    weights: tuple[int, int, int]
    fields: tuple[str, ...]
    value: Callable[[Ctx, dict[str, Any]], int]  # the points the value check earns
    early_exit: bool = False  # a missing field ends validation (and the task fails)
    pass_rule: str = "score60"  # "score60": score >= 60; "all": every check; "value": the value check


def _score_query(q: RefQuery, v: Ctx) -> tuple[float, bool, list[Check]]:
    ok, data = _answer_data(v)
    w_ok, w_fields, w_value = q.weights
    has = all(f in data for f in q.fields)
    checks = [
        Check("query_success", w_ok, ok),
        Check("format", w_fields, ok and has, f"fields {list(q.fields)}"),
    ]
    if not ok or (q.early_exit and not has):
        return float(sum(c.weight for c in checks if c.passed)), False, checks
    points = q.value(v, data)
    checks.append(Check("value", w_value, points == w_value, f"{max(points, 0)} of {w_value} points"))
    score = float(w_ok + (w_fields if has else 0) + max(points, 0))
    if points < 0:  # the reference stops here and fails the task
        return score, False, checks
    if q.pass_rule == "all":
        success = all(c.passed for c in checks)
    elif q.pass_rule == "value":
        success = points > 0
    else:
        success = score >= 60
    return score, success, checks


def _truth(v: Ctx) -> Any:
    return v.before["truth"]


def _as_int_or_hex(raw: Any) -> int | None:
    if isinstance(raw, str) and raw.startswith("0x"):
        try:
            return int(raw, 16)
        except ValueError:
            return None
    return _as_int(raw)


def _exact_int(field: str, weight: int, hex_ok: bool = False) -> Callable[[Ctx, dict[str, Any]], int]:
    parse = _as_int_or_hex if hex_ok else _as_int
    return lambda v, d: weight if parse(d.get(field, 0)) == _truth(v) else 0


def _pair_reserves(v: Ctx, d: dict[str, Any]) -> int:
    r0, r1, ts = v.before["ref_reserves"]
    got = []
    for key in ("reserve0", "reserve1", "blockTimestampLast"):
        raw = d.get(key, "0")
        if isinstance(raw, str):
            try:
                raw = int(raw)
            except ValueError:
                return -1  # the reference returns with the format points only: a failed task
        got.append(raw)
    if got == [r0, r1, ts]:
        return 40

    def close(x: Any, want: int) -> bool:
        return abs(x - want) / max(want, 1) < 0.01 if want > 0 else x == 0

    try:
        return 35 if close(got[0], r0) and close(got[1], r1) else 0
    except TypeError:
        return 0


def _amounts(d: dict[str, Any]) -> list[Any] | None:
    raw = d.get("amounts", [])
    try:
        if isinstance(raw, str):
            raw = json.loads(raw)
        return [int(a) if isinstance(a, str) else a for a in raw]
    except (ValueError, TypeError):
        return None


def _swap_output(v: Ctx, d: dict[str, Any]) -> int:
    want = v.before["ref_amounts"]
    got = _amounts(d)
    if got is None or len(got) != len(want) or not want:
        return -1
    try:
        if got[-1] == want[-1]:
            return 40
        return 35 if abs(got[-1] - want[-1]) / max(want[-1], 1) < 0.01 else -1
    except TypeError:
        return -1


def _swap_input(v: Ctx, d: dict[str, Any]) -> int:
    want = v.before["ref_amounts"]
    raw = d.get("amounts", [])
    try:
        if isinstance(raw, list) and len(raw) >= 2:
            got_in, got_out = int(raw[0]), int(raw[-1])
        else:
            got_in, got_out = int(d.get("amount_in", 0)), int(d.get("amount_out", 0))
    except (TypeError, ValueError):
        return 0
    want_in, want_out = int(want[0]), int(want[-1])
    d_in = abs(got_in - want_in) / want_in * 100 if want_in > 0 else 0
    d_out = abs(got_out - want_out) / want_out * 100 if want_out > 0 else 0
    if d_in <= 1 and d_out <= 1:
        return 40
    return max(0, int(40 * (1 - min(d_in, d_out) / 10)))


def _metadata(v: Ctx, d: dict[str, Any]) -> int:
    truth = _truth(v)
    points = (15 if d.get("name", "") == truth["name"] else 0) + (
        15 if d.get("symbol", "") == truth["symbol"] else 0
    )
    return points + (20 if _as_int(d.get("decimals", 0)) == truth["decimals"] else 0)


def _owner(v: Ctx, d: dict[str, Any]) -> int:
    got = d.get("owner", "")
    return 30 if isinstance(got, str) and got.lower() == str(_truth(v)).lower() else 0


def _approved(v: Ctx, d: dict[str, Any]) -> int:
    """The reference's getApproved check: the returned address is the one approved (case-blind; "0x0" is
    the zero address)."""
    zero = "0x" + "0" * 40
    got = str(d.get("approved_address", "")).lower()
    got = zero if got == "0x0" else got
    return 40 if got == str(_truth(v)).lower() else 0


def _token_uri(v: Ctx, d: dict[str, Any]) -> int:
    got = d.get("tokenURI", "")
    return 30 if isinstance(got, str) and got and got == _truth(v) else 0


def _block_number(v: Ctx, d: dict[str, Any]) -> int:
    got = _as_int(d.get("block_number", 0))
    if got is None or got <= 0:
        return 0
    return 0 if _truth(v) > 0 and abs(got - _truth(v)) > 100 else 25


def _gas_price(v: Ctx, d: dict[str, Any]) -> int:
    fee, tip = _as_int(d.get("maxFeePerGas", "0")), _as_int(d.get("maxPriorityFeePerGas", "0"))
    if fee is None or tip is None:
        return 0
    return 30 if fee > 0 and tip >= 0 and fee >= tip else 0


def _nonce(v: Ctx, d: dict[str, Any]) -> int:
    got = _as_int(d.get("nonce", -1))
    return 30 if got is not None and got >= 0 else 0  # any non-negative count passes (the reference's rule)


QUERIES: dict[str, RefQuery] = {
    "query_erc20_allowance": RefQuery(
        (30, 30, 40),
        ("allowance_raw",),
        _exact_int("allowance_raw", 40, hex_ok=True),
        early_exit=True,
        pass_rule="all",
    ),
    "query_pair_reserves": RefQuery(
        (30, 30, 40), ("reserve0", "reserve1", "blockTimestampLast"), _pair_reserves, True, "value"
    ),
    "query_swap_output_amount": RefQuery((30, 30, 40), ("amounts",), _swap_output, True, "value"),
    "query_swap_input_amount": RefQuery((30, 30, 40), ("amounts", "amount_in", "amount_out"), _swap_input),
    "query_staked_amount": RefQuery(
        (30, 30, 40),
        ("staked_amount", "deposit_time"),
        lambda v, d: _graded(_as_int(d.get("staked_amount", "0")), _truth(v), 1, 10, 40),
    ),
    "query_pending_rewards": RefQuery(
        (30, 30, 40),
        ("pending_rewards",),
        lambda v, d: _graded(_as_int(d.get("pending_rewards", "0")), _truth(v), 5, 20, 40),
    ),
    "query_token_metadata": RefQuery((25, 25, 50), ("name", "symbol", "decimals", "totalSupply"), _metadata),
    "query_token_total_supply": RefQuery(
        (40, 30, 30),
        ("totalSupply",),
        lambda v, d: _graded(_as_int(d.get("totalSupply", "0")), _truth(v), 0.1, 10, 30),
    ),
    "query_nft_owner": RefQuery((40, 30, 30), ("owner",), _owner),
    "query_nft_token_uri": RefQuery((40, 30, 30), ("tokenURI",), _token_uri),
    "query_nft_approval_status": RefQuery((30, 30, 40), ("approved_address",), _approved, True, "value"),
    "query_nft_balance": RefQuery((40, 30, 30), ("balance",), _exact_int("balance", 30)),
    "query_current_block_number": RefQuery((50, 25, 25), ("block_number",), _block_number),
    "query_gas_price": RefQuery((40, 30, 30), ("maxFeePerGas", "maxPriorityFeePerGas"), _gas_price),
    "query_transaction_count_nonce": RefQuery((40, 30, 30), ("nonce",), _nonce),
}


def _query_task(q: RefQuery) -> RefTask:
    return RefTask(lambda v: [], gated=False, query=q)


def _m_reserves(w: World, p: dict[str, Any]) -> dict[str, Any]:
    return {"ref_reserves": [int(x) for x in w.read(p["pair"], "getReserves")[:3]]}


def _m_amounts(fn: str) -> Callable[[World, dict[str, Any]], dict[str, Any]]:
    def measure(w: World, p: dict[str, Any]) -> dict[str, Any]:
        path = [w.addresses[r] for r in p["path"]]
        return {
            "ref_amounts": [
                int(a) for a in getattr(w.reader("router").functions, fn)(wei(p["amount"]), path).call()
            ]
        }

    return measure


ATOMIC.update(
    {
        "query_bnb_balance": RefTask(_query_field("balance_wei"), gated=False),
        "query_erc20_balance": RefTask(_query_field("balance_raw"), gated=False),
    }
)


ATOMIC.update({task_id: _query_task(q) for task_id, q in QUERIES.items()})


def _m_allowance(
    token: str | None, spender: str, key: str
) -> Callable[[World, dict[str, Any]], dict[str, Any]]:
    """The agent's allowance of ``token`` (None: the swap path's first token) to ``spender``."""

    def measure(w: World, p: dict[str, Any]) -> dict[str, Any]:
        role = token if token is not None else str(p["path"][0])
        reader = w.reader(role).functions
        return {key: int(reader.allowance(AGENT.address, w.addresses[spender]).call())}

    return measure


def _m_lp_allowance(w: World, p: dict[str, Any]) -> dict[str, Any]:
    reader = w.reader(p["pair"]).functions
    return {"ref_lp_allowance": int(reader.allowance(AGENT.address, w.addresses["router"]).call())}


def _m_both(
    *measures: Callable[[World, dict[str, Any]], dict[str, Any]],
) -> Callable[[World, dict[str, Any]], dict[str, Any]]:
    def measure(w: World, p: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for m in measures:
            out.update(m(w, p))
        return out

    return measure


def _m_native_of(role: str) -> Callable[[World, dict[str, Any]], dict[str, Any]]:
    def measure(w: World, p: dict[str, Any]) -> dict[str, Any]:
        return {"ref_target_native": w.chain.get_balance(w.addresses[role])}

    return measure


def _m_receiver_token(w: World, p: dict[str, Any]) -> dict[str, Any]:
    return {
        "ref_receiver_token": int(w.reader("pay1363").functions.balanceOf(w.addresses["receiver1363"]).call())
    }


# State the reference's snapshot holds that this env's default measure does not: merged into
# ``before``/``after`` under the reference profile.
EXTRA_MEASURE: dict[str, Callable[[World, dict[str, Any]], dict[str, Any]]] = {
    "bnb_transfer_to_contract": _m_native_of("fallback"),
    "contract_call_with_value": _m_native_of("donation"),
    "erc20_transfer_with_callback_1363": _m_receiver_token,
    **{
        t: _m_allowance(None, "router", "ref_allowance")
        for t in (
            "swap_exact_tokens_for_bnb",
            "swap_exact_tokens_for_tokens",
            "swap_multihop_routing",
            "swap_tokens_for_exact_tokens",
        )
    },
    "add_liquidity_bnb_token": _m_allowance("stable", "router", "ref_allowance"),
    "add_liquidity_tokens": _m_both(
        _m_allowance("stable", "router", "ref_allowance"),
        _m_allowance("stable2", "router", "ref_allowance_b"),
    ),
    "remove_liquidity_bnb_token": _m_lp_allowance,
    "remove_liquidity_tokens": _m_lp_allowance,
    "query_pair_reserves": _m_reserves,
    "query_swap_output_amount": _m_amounts("getAmountsOut"),
    "query_swap_input_amount": _m_amounts("getAmountsIn"),
}


def measure(world: World, task_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """The reference-only state of ``task_id`` (empty for most tasks)."""
    extra = EXTRA_MEASURE.get(task_id)
    return extra(world, params) if extra is not None else {}


# The reference's answer formats: each ported query's answer, from the default oracle's ``value``.
ANSWER_FORMATS: dict[str, str] = {
    "query_bnb_balance": '{"balance_wei": str(value)}',
    "query_erc20_balance": '{"balance_raw": str(value)}',
    "query_erc20_allowance": '{"allowance_raw": str(value)}',
    "query_staked_amount": '{"staked_amount": str(value), "deposit_time": 0}',
    "query_pending_rewards": '{"pending_rewards": str(value)}',
    "query_token_total_supply": '{"totalSupply": str(value)}',
    "query_nft_owner": '{"owner": value}',
    "query_nft_token_uri": '{"tokenURI": value}',
    "query_nft_approval_status": '{"approved_address": value}',
    "query_nft_balance": '{"balance": str(value)}',
    "query_current_block_number": '{"block_number": value}',
    "query_transaction_count_nonce": '{"nonce": value}',
}
QUERY_FIELDS = {task_id: q.fields for task_id, q in QUERIES.items()} | {
    "query_bnb_balance": ("balance_wei",),
    "query_erc20_balance": ("balance_raw",),
}


def is_ported(task_id: str, split: str) -> bool:
    """Whether the reference's own rules score this task (composites: always)."""
    return split == "composite" or task_id in ATOMIC


def score_atomic(task_id: str, v: Ctx) -> tuple[float, bool, list[Check]]:
    """(score, success, checks) by the reference validator of ``task_id``."""
    ref = ATOMIC[task_id]
    if ref.query is not None:
        return _score_query(ref.query, v)
    checks = ref.checks(v)
    if ref.gated and not tx_ok(v):
        return 0.0, False, checks
    if ref.share_score:
        score = float(int(sum(c.passed for c in checks) / len(checks) * 100))
    else:
        score = float(sum(c.weight for c in checks if c.passed))
    success = all(c.passed for c in checks) if ref.threshold is None else score >= ref.threshold
    return score, success, checks


def score_composite(task_id: str, v: Ctx, rounds: int) -> tuple[float, bool, list[Check], float]:
    """(final score, success, checks, decay) by the reference controller's composite rules."""
    optimal, _ = composite_steps(task_id)
    if task_id in PURE_QUERY:
        expected = PURE_QUERY[task_id]
        # The reference counts every round whose action succeeded as a completed query: a query
        # answered, and also a transaction sent (its status is not looked at).
        answered = len(v.answers) + len(v.txs)
        batched = max((_batched(a) for a in v.answers), default=0)
        if batched >= expected:
            answered = batched
        base = 100.0 * min(1.0, answered / expected)
        checks = [Check("queries_answered", 100, answered >= expected, f"{answered} of {expected} rounds")]
    else:
        base = 100.0 if v.txs else 0.0
        checks = [Check("transaction_executed", 100, bool(v.txs), f"{len(v.txs)} transaction(s) sent")]
    decay = 0.0 if rounds <= 0 else (1.0 if rounds <= optimal else optimal / rounds)
    score = base * decay
    return score, score >= 60.0, checks, decay


def _batched(answer: Any) -> int:
    """How many balances one answer reports in the reference's batched formats."""
    if not isinstance(answer, dict):
        return 0
    for holder in (answer, answer.get("data") if isinstance(answer.get("data"), dict) else {}):
        for key in ("balances", "portfolio"):
            inner = holder.get(key)
            if isinstance(inner, dict) and len(inner) > 1:
                return len(inner)
    return 0


# The reference's parameter ranges where they differ from ours (drawn under scoring="reference").
def _uniform(low: float, high: float, decimals: int) -> dict[str, Any]:
    return {"amount": {"rule": "uniform", "low": low, "high": high, "decimals": decimals}}


_PERCENT_10_90 = {"percent": {"rule": "choice", "values": list(range(10, 95, 5))}}
_LP_FARM = {"pool": {"rule": "fixed", "value": "lp_farm"}}  # the reference's SimpleRewardPool
PARAM_RANGES: dict[str, dict[str, dict[str, Any]]] = {
    "bnb_transfer_percentage": _PERCENT_10_90,
    "erc20_transfer_percentage": _PERCENT_10_90,
    "bnb_transfer_to_contract": _uniform(0.001, 0.05, 3),
    "wbnb_deposit": _uniform(0.001, 0.05, 3),
    "wbnb_withdraw": _uniform(0.001, 0.05, 3),
    "contract_call_with_value": _uniform(0.001, 0.05, 3),
    "erc20_approve": _uniform(100, 500, 2),
    "erc20_increase_allowance": _uniform(50, 200, 2),
    "erc20_burn": _uniform(0.001, 1.0, 3),
    "erc20_permit": _uniform(100, 1000, 2),
    "erc20_transfer_with_callback_1363": _uniform(1, 50, 2),
    "erc20_transferfrom_basic": _uniform(10, 100, 2),
    "add_liquidity_bnb_token": _uniform(0.01, 0.05, 3),
    "swap_exact_bnb_for_tokens": _uniform(0.001, 0.01, 4),
    "swap_exact_tokens_for_bnb": _uniform(0.5, 5.0, 2),
    "swap_exact_tokens_for_tokens": _uniform(0.5, 5.0, 2),
    "swap_tokens_for_exact_tokens": _uniform(0.5, 3.0, 2),
    "stake_single_token": _uniform(2.0, 8.0, 1),
    "query_swap_output_amount": {
        **_uniform(10, 100, 2),
        "path": {"rule": "fixed", "value": ["stable", "stable2"]},
    },
    "query_swap_input_amount": {
        **_uniform(10, 100, 2),
        "path": {"rule": "fixed", "value": ["stable", "stable2"]},
    },
    "query_pair_reserves": {"pair": {"rule": "fixed", "value": "pair_stable_stable2"}},  # USDT/BUSD there
    "emergency_withdraw": _LP_FARM,
    "harvest_rewards": _LP_FARM,
    "query_pending_rewards": _LP_FARM,
    "query_staked_amount": {"pool": {"rule": "fixed", "value": "staking_pool"}},  # SimpleStaking there
}


def spec_for(spec: Any) -> Any:
    """``spec`` with the reference's parameter ranges (unchanged when they are ours)."""
    override = PARAM_RANGES.get(spec.task_id)
    if not override:
        return spec
    from dataclasses import replace

    return replace(spec, params={**spec.params, **override})


def _no_prior_stake(pool: str) -> Callable[[World, dict[str, Any]], None]:
    """The reference's account starts with no stake in ``pool`` (ours has one from genesis)."""

    def prepare(world: World, params: dict[str, Any]) -> None:
        if int(world.reader(pool).functions.stakedBalance(AGENT.address).call()) > 0:
            world.call(AGENT, pool, "emergencyWithdraw")

    return prepare


# Atomic set-up the reference's state implies before its snapshot.
ATOMIC_SETUP: dict[str, Callable[[World, dict[str, Any]], None]] = {
    # deposit() pays the pending rewards of a prior stake in the staked token itself, which the
    # reference's balance check (decrease = amount) does not expect: its account has no stake.
    "stake_single_token": _no_prior_stake("staking_pool"),
}


def setup(world: World, task_id: str, params: dict[str, Any]) -> None:
    """Allowances the reference sets before a composite starts; its atomic preconditions."""
    if task_id in ATOMIC_SETUP:
        ATOMIC_SETUP[task_id](world, params)
    for token, spender, factor in PRE_APPROVALS.get(task_id, []):
        role = params["path"][0] if token == "path0" else token
        spender_address = AGENT.address if spender == "agent" else world.addresses[spender]
        amount = MAX_UINT if factor is None else int(wei(params["amount"]) * factor)
        world.call(AGENT, role, "approve", spender_address, amount)


REFERENCE_ANSWER_WRAPPER = """

_oracle_skill = execute_skill


def execute_skill(w3, agent_address, contracts):
    value = _oracle_skill(w3, agent_address, contracts)["query_result"]
    return {{"query_result": {expr}}}
"""


def _allowance_helper_script(fn: str) -> Callable[[dict[str, Any], dict[str, str]], str]:
    def script(p: dict[str, Any], n: dict[str, str]) -> str:

        return tx_script(
            n[p["token"]],
            "LynnToken",
            [fn],
            f'"{fn}", args=[{p["spender"]!r}, w3.to_wei({p["amount"]!r}, "ether")]',
        )

    return script


def _amounts_script(fn: str, named: bool) -> Callable[[dict[str, Any], dict[str, str]], str]:
    def script(p: dict[str, Any], n: dict[str, str]) -> str:

        extra = ', "amount_in": str(amounts[0]), "amount_out": str(amounts[-1])' if named else ""
        return query_script(
            n["router"],
            "UniswapV2Router02",
            [fn],
            '{"amounts": [str(a) for a in amounts]' + extra + "}",
            pre=f'amounts = contract.functions.{fn}(w3.to_wei({p["amount"]!r}, "ether"), {path_expr(n, p["path"])}).call()',
        )

    return script


def _reserves_script(p: dict[str, Any], n: dict[str, str]) -> str:

    return query_script(
        n[p["pair"]],
        "UniswapV2Pair",
        ["getReserves"],
        '{"reserve0": str(r[0]), "reserve1": str(r[1]), "blockTimestampLast": str(r[2])}',
        pre="r = contract.functions.getReserves().call()",
    )


def _metadata_script(p: dict[str, Any], n: dict[str, str]) -> str:

    f = "contract.functions"
    return query_script(
        n[p["token"]],
        "LynnToken",
        ["name", "symbol", "decimals", "totalSupply"],
        f'{{"name": {f}.name().call(), "symbol": {f}.symbol().call(), "decimals": {f}.decimals().call(), '
        f'"totalSupply": str({f}.totalSupply().call())}}',
    )


def _gas_script(p: dict[str, Any], n: dict[str, str]) -> str:

    return plain_script(
        'tip = w3.to_wei(1, "gwei")\n'
        'return {"query_result": {"maxFeePerGas": str(w3.eth.gas_price + tip), "maxPriorityFeePerGas": str(tip)}}'
    )


# Tasks whose reference validator asks for another call or answer than the default oracle gives.
ORACLE_OVERRIDES: dict[str, Callable[[dict[str, Any], dict[str, str]], str]] = {
    "erc20_increase_allowance": _allowance_helper_script("increaseAllowance"),
    "erc20_decrease_allowance": _allowance_helper_script("decreaseAllowance"),
    "query_pair_reserves": _reserves_script,
    "query_swap_output_amount": _amounts_script("getAmountsOut", named=False),
    "query_swap_input_amount": _amounts_script("getAmountsIn", named=True),
    "query_token_metadata": _metadata_script,
    "query_gas_price": _gas_script,
    "contract_call_with_params": lambda p, n: _tx(
        n["board"], "MessageBoard", "setMessage", repr(p["message"])
    ),
}


def _tx(key: str, art: str, fn: str, args: str) -> str:

    return tx_script(key, art, [fn], f'"{fn}", args=[{args}]')


def oracle_scripts(
    task_id: str,
    scripts: list[str],
    params: dict[str, Any] | None = None,
    names: dict[str, str] | None = None,
) -> list[str]:
    """The default oracle's scripts adapted to the reference's calls and answer formats."""
    if task_id in ORACLE_OVERRIDES and params is not None and names is not None:
        scripts = [ORACLE_OVERRIDES[task_id](params, names)]
    expr = ANSWER_FORMATS.get(task_id)
    if expr is None:
        return scripts
    return [s + REFERENCE_ANSWER_WRAPPER.format(expr=expr) for s in scripts]
