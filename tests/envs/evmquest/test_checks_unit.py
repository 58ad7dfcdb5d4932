"""EVMQuest validators on hand-built transactions, receipts and state: no chain.

Every check type is exercised on both sides of its tolerance, with reverted transactions, gas at
and past its limit, and partial success; the episode score (``EVMQuestEnv._score``) is checked on
hand-made check lists. Selectors are computed here with keccak directly, calldata with eth_abi, and
every expected number is written out, so nothing is taken from the code under test.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from eth_abi import encode
from eth_utils import keccak

from lynn.envs.evmquest import atomic as at
from lynn.envs.evmquest import catalog
from lynn.envs.evmquest import composites as comp
from lynn.envs.evmquest import taskkit as kit
from lynn.envs.evmquest.taskkit import Check, Ctx, TxRecord

E18 = 10**18
ROLES = [
    "stable",
    "stable2",
    "gov",
    "nft",
    "multi",
    "router",
    "wrapped",
    "staking_pool",
    "lp_farm",
    "pair_wrapped_stable",
    "pair_wrapped_gov",
    "pair_stable_stable2",
]
ADDR = {role: "0x" + f"{i + 1:02x}" * 20 for i, role in enumerate(ROLES)}
RCPT = "0x" + "ab" * 20
R1, R2, R3 = ("0x" + f"{c}" * 40 for c in "cde")


def sel(signature: str) -> str:
    return "0x" + keccak(text=signature)[:4].hex()


def calldata(signature: str, types: list[str], args: list[Any]) -> str:
    return sel(signature) + encode(types, args).hex()


def tx(
    to: str | None = None,
    data: str = "0x",
    value: int = 0,
    status: int = 1,
    gas_used: int = 50_000,
    fee: int = 0,
) -> TxRecord:
    return TxRecord(to=to, data=data, value=value, status=status, gas_used=gas_used, fee=fee, tx_hash="0x1")


def ctx(
    params: dict | None = None,
    before: dict | None = None,
    after: dict | None = None,
    txs: list[TxRecord] | None = None,
    answers: list | None = None,
) -> Ctx:
    world = SimpleNamespace(addresses=dict(ADDR))
    return Ctx(world, params or {}, before or {}, after or {}, txs or [], answers or [])  # type: ignore[arg-type]


def by_name(checks: list[Check]) -> dict[str, bool]:
    return {c.name: c.passed for c in checks}


def failed(checks: list[Check]) -> list[str]:
    return [c.name for c in checks if not c.passed]


def earned(checks: list[Check]) -> int:
    return sum(c.weight for c in checks if c.passed)


# --- the basic check helpers ----------------------------------------------------------------------
def test_close_both_sides_of_the_tolerance() -> None:
    assert kit.close(1_001_000, 1_000_000) and kit.close(999_000, 1_000_000)  # default 0.1%
    assert not kit.close(1_001_001, 1_000_000) and not kit.close(998_999, 1_000_000)
    assert kit.close(-1_001_000, -1_000_000) and not kit.close(-1_001_001, -1_000_000)
    assert kit.close(1_020, 1_000, rel=0.02) and not kit.close(1_021, 1_000, rel=0.02)
    assert kit.close(0, 0) and not kit.close(1, 0) and not kit.close(-1, 0)
    assert kit.close(5, 5, rel=0) and not kit.close(6, 5, rel=0)


def test_c_status_judges_the_last_transaction() -> None:
    assert kit.c_status(ctx()) == Check("tx_status", 30, False, "no transaction sent")
    assert kit.c_status(ctx(txs=[tx(status=0)]), 7) == Check("tx_status", 7, False, "status=0")
    assert kit.c_status(ctx(txs=[tx(status=0), tx(status=1)])).passed
    assert not kit.c_status(ctx(txs=[tx(status=1), tx(status=0)])).passed


def test_c_to_and_c_selector() -> None:
    v = ctx(
        txs=[tx(to=RCPT.upper().replace("0X", "0x"), data=sel("transfer(address,uint256)").upper() + "00")]
    )
    assert kit.c_to(v, RCPT, 25).passed and kit.c_to(v, RCPT, 25).name == "target"
    assert kit.c_to(v, RCPT, 25, "recipient").name == "recipient"
    assert not kit.c_to(v, ADDR["stable"], 25).passed
    assert not kit.c_to(ctx(txs=[tx(to=None)]), RCPT, 25).passed  # a contract creation has no target
    assert not kit.c_to(ctx(), RCPT, 25).passed
    ok = kit.c_selector(v, ["approve(address,uint256)", "transfer(address,uint256)"], 10)
    assert ok == Check(
        "function",
        10,
        True,
        f"selector={sel('transfer(address,uint256)')}, expected one of "
        "['approve(address,uint256)', 'transfer(address,uint256)']",
    )
    assert not kit.c_selector(v, ["approve(address,uint256)"], 10).passed
    assert not kit.c_selector(ctx(txs=[tx(data=sel("transfer(address,uint256)")[:9])]), ["x()"], 10).passed
    assert tx(data="0x1234").selector == "0x" and tx(data="").selector == "0x"
    assert tx(data="0xA9059CBB00").selector == "0xa9059cbb"
    assert not kit.c_selector(ctx(), ["transfer(address,uint256)"], 10).passed


def test_c_value_exact_and_with_tolerance() -> None:
    v = ctx(txs=[tx(value=1_000)])
    assert kit.c_value(v, 1_000, 25).passed and not kit.c_value(v, 999, 25).passed
    assert kit.c_value(v, 990, 25, rel=0.02).passed and not kit.c_value(v, 1_030, 25, rel=0.02).passed
    assert not kit.c_value(ctx(), 0, 25).passed  # no transaction: even a 0 value is not "sent"
    assert kit.c_value(v, 1_000, 25).detail == "value=1000, expected 1000"


def test_c_gas_limits() -> None:
    assert kit.c_gas(ctx(txs=[tx(gas_used=100_000)]), 10, 100_000).passed
    assert not kit.c_gas(ctx(txs=[tx(gas_used=100_001)]), 10, 100_000).passed
    assert not kit.c_gas(ctx(txs=[tx(gas_used=0)]), 10, 100_000).passed
    assert kit.c_gas(ctx(txs=[tx(gas_used=1_000_000)])).passed  # default limit GAS_SANE
    assert not kit.c_gas(ctx(txs=[tx(gas_used=1_000_001)])).passed
    assert kit.c_gas(ctx(txs=[tx(gas_used=5)])) == Check("gas_sane", 10, True, "gas_used=5, limit 1000000")
    assert not kit.c_gas(ctx()).passed


def test_c_eq_kinds() -> None:
    assert kit.c_eq("n", 5, 100, 100) == Check("n", 5, True, "got 100, expected 100")
    assert not kit.c_eq("n", 5, 101, 100).passed  # rel 0: exact
    assert kit.c_eq("n", 5, 101, 100, rel=0.01).passed and not kit.c_eq("n", 5, 102, 100, rel=0.01).passed
    assert kit.c_eq("a", 5, RCPT.upper(), RCPT).passed  # text: case-blind
    assert not kit.c_eq("a", 5, RCPT, ADDR["gov"]).passed
    assert kit.c_eq("b", 5, True, True).passed and not kit.c_eq("b", 5, False, True).passed
    assert not kit.c_eq("m", 5, "100", 100).passed


def test_c_answer_is_strict_and_takes_the_last_answer() -> None:
    assert not kit.c_answer(ctx(), 5).passed
    assert kit.c_answer(ctx(answers=[1, "5"]), 5).passed  # decimal digits are an integer
    assert not kit.c_answer(ctx(answers=[5, 6]), 5).passed  # the last answer counts
    assert not kit.c_answer(ctx(answers=[5.0]), 5).passed  # no floats
    assert not kit.c_answer(ctx(answers=[5_001]), 5_000).passed  # exact: no tolerance at all
    assert kit.c_answer(ctx(answers=["0x10"]), 16).passed
    assert not kit.c_answer(ctx(answers=[True]), 1).passed
    assert kit.c_answer(ctx(answers=[RCPT.upper().replace("0X", "0x")]), RCPT).passed
    assert kit.c_answer(ctx(answers=[{"a": 1, "b": "2"}]), {"a": 1, "b": 2}).passed
    assert not kit.c_answer(ctx(answers=[{"a": 1}]), {"a": 1, "b": 2}).passed
    assert (
        kit.c_answer(ctx(answers=[False]), False).passed and not kit.c_answer(ctx(answers=[0]), False).passed
    )
    assert kit.c_answer(ctx(answers=[3]), 3).weight == 100


def test_ctx_helpers() -> None:
    v = ctx(before={"k": 10}, after={"k": "4"}, txs=[tx(fee=3), tx(fee=4)])
    assert v.delta("k") == -6 and v.fees == 7 and v.tx is v.txs[-1] and v.addr("gov") == ADDR["gov"]
    assert ctx().tx is None and ctx().fees == 0
    assert kit.wei("1.5") == 15 * 10**17 and kit.wei(2) == 2 * E18 and kit.wei("0.000000000000000001") == 1
    assert Check("x", 3, True, "d").as_dict() == {"name": "x", "weight": 3, "passed": True, "detail": "d"}


# --- atomic validators ----------------------------------------------------------------------------
def native_ctx(value: int, spent: int, txs: list[TxRecord] | None = None, to: str = RCPT) -> Ctx:
    txs = txs if txs is not None else [tx(to=to, value=value, gas_used=21_000, fee=0)]
    return ctx(
        params={"amount": "1.5", "recipient": RCPT},
        before={"agent_native": 10 * E18},
        after={"agent_native": 10 * E18 - spent},
        txs=txs,
    )


def test_native_transfer_full_and_partial_credit() -> None:
    want = 15 * 10**17
    fee = 21_000 * 10**9
    good = native_ctx(want, want + fee, [tx(to=RCPT, value=want, gas_used=21_000, fee=fee)])
    checks = at._native_transfer_checks(good, want, RCPT)
    assert failed(checks) == [] and earned(checks) == 100
    # a reverted first try: its fee counts in what the sender may spend
    retry = native_ctx(
        want, want + 2 * fee, [tx(to=RCPT, value=want, status=0, fee=fee), tx(to=RCPT, value=want, fee=fee)]
    )
    assert failed(at._native_transfer_checks(retry, want, RCPT)) == []
    assert failed(at._native_transfer_checks(native_ctx(want, want + 1), want, RCPT)) == [
        "sender_balance_delta"
    ]
    wrong_value = native_ctx(want - 1, want - 1)
    assert failed(at._native_transfer_checks(wrong_value, want, RCPT)) == ["value", "sender_balance_delta"]
    reverted = native_ctx(want, 0, [tx(to=RCPT, value=want, status=0)])
    assert failed(at._native_transfer_checks(reverted, want, RCPT)) == ["tx_status", "sender_balance_delta"]
    elsewhere = native_ctx(want, want, to=ADDR["gov"])
    assert failed(at._native_transfer_checks(elsewhere, want, RCPT)) == ["recipient"]
    heavy = native_ctx(want, want, [tx(to=RCPT, value=want, gas_used=100_001)])
    assert failed(at._native_transfer_checks(heavy, want, RCPT)) == ["gas_sane"]
    assert [c.weight for c in at._native_transfer_checks(good, want, RCPT)] == [30, 25, 25, 10, 10]


def test_percent_of_native_at_reset_or_after_failed_tries() -> None:
    base = {"percent": "25"}
    v = ctx(params=base, before={"agent_native": 1_000}, txs=[tx(value=250)])
    assert at._percent_of_native(v) == 250
    # after a reverted try that paid 100 in fees, 25% of what is left is accepted too
    v = ctx(params=base, before={"agent_native": 1_000}, txs=[tx(status=0, fee=100), tx(value=225, fee=7)])
    assert at._percent_of_native(v) == 225
    v = ctx(params=base, before={"agent_native": 1_000}, txs=[tx(status=0, fee=100), tx(value=250)])
    assert at._percent_of_native(v) == 250
    v = ctx(params=base, before={"agent_native": 1_000}, txs=[tx(status=0, fee=100), tx(value=224)])
    assert at._percent_of_native(v) == 250
    assert at._percent_of_native(ctx(params=base, before={"agent_native": 1_003})) == 250


def test_message_checks() -> None:
    data = "0x" + b"gm, friend".hex()
    p = {"message": "gm, friend", "recipient": RCPT, "amount": "0.1"}
    good = ctx(
        params=p, txs=[tx(to=RCPT, value=10**17, data=data.upper().replace("0X", "0x"), gas_used=200_000)]
    )
    assert failed(at._message_checks(good)) == [] and earned(at._message_checks(good)) == 100
    bad = ctx(params=p, txs=[tx(to=RCPT, value=10**17, data=data + "00", gas_used=200_001)])
    assert failed(at._message_checks(bad)) == ["message_data", "gas_sane"]
    assert failed(at._message_checks(ctx(params=p))) == [
        "tx_status",
        "recipient",
        "value",
        "message_data",
        "gas_sane",
    ]


def erc20_ctx(received: int, debited: int, status: int = 1, to: str | None = None, gas: int = 60_000) -> Ctx:
    data = calldata("transfer(address,uint256)", ["address", "uint256"], [RCPT, 5 * E18])
    return ctx(
        params={"token": "gov", "recipient": RCPT},
        before={"agent_token": 100 * E18, "recipient_token": 0},
        after={"agent_token": 100 * E18 - debited, "recipient_token": received},
        txs=[tx(to=to or ADDR["gov"], data=data, status=status, gas_used=gas)],
    )


def test_erc20_transfer_checks() -> None:
    want = 5 * E18
    assert failed(at._erc20_transfer_checks(erc20_ctx(want, want), want)) == []
    partial = at._erc20_transfer_checks(erc20_ctx(want - 1, want), want)
    assert failed(partial) == ["recipient_received"] and earned(partial) == 75
    assert failed(at._erc20_transfer_checks(erc20_ctx(want, want + 1), want)) == ["sender_balance_delta"]
    assert failed(at._erc20_transfer_checks(erc20_ctx(want, want, to=ADDR["stable"]), want)) == [
        "token_contract"
    ]
    assert failed(at._erc20_transfer_checks(erc20_ctx(want, want, gas=200_001), want)) == ["gas_sane"]
    assert failed(at._erc20_transfer_checks(erc20_ctx(0, 0, status=0), want)) == [
        "tx_status",
        "recipient_received",
        "sender_balance_delta",
    ]
    default_token = ctx(
        params={"recipient": RCPT},
        before={"agent_token": want, "recipient_token": 0},
        after={"agent_token": 0, "recipient_token": want},
        txs=[tx(to=ADDR["stable"], data=sel("transfer(address,uint256)"))],
    )
    assert failed(at._erc20_transfer_checks(default_token, want)) == []  # "stable" when no token is named


def test_allowance_checks() -> None:
    data = sel("approve(address,uint256)") + "00" * 64
    v = ctx(params={"token": "stable2"}, after={"allowance": 7}, txs=[tx(to=ADDR["stable2"], data=data)])
    assert failed(at._allowance_checks(v, 7)) == []
    assert failed(at._allowance_checks(v, 8)) == ["allowance"]
    assert failed(at._allowance_checks(v, 7, ["increaseAllowance(address,uint256)"])) == ["function"]
    assert [c.weight for c in at._allowance_checks(v, 7)] == [30, 15, 10, 35, 10]
    v = ctx(after={"allowance": 7}, txs=[tx(to=ADDR["stable"], data=data, gas_used=200_001)])
    assert failed(at._allowance_checks(v, 7)) == ["gas_sane"]


def test_nft_transfer_checks() -> None:
    sigs = ["safeTransferFrom(address,address,uint256)"]
    good = ctx(
        params={"recipient": RCPT},
        before={"agent_count": 5},
        after={"agent_count": 4, "owner": RCPT.upper().replace("0X", "0x")},
        txs=[tx(to=ADDR["nft"], data=sel(sigs[0]), gas_used=300_000)],
    )
    assert (
        failed(at._nft_transfer_checks(good, sigs)) == []
        and earned(at._nft_transfer_checks(good, sigs)) == 100
    )
    two = ctx(
        params={"recipient": RCPT},
        before={"agent_count": 5},
        after={"agent_count": 3, "owner": ADDR["gov"]},
        txs=[tx(to=ADDR["nft"], data=sel("transferFrom(address,address,uint256)"), gas_used=300_001)],
    )
    assert failed(at._nft_transfer_checks(two, sigs)) == [
        "function",
        "new_owner",
        "agent_count_delta",
        "gas_sane",
    ]


def test_1155_checks_with_and_without_data() -> None:
    sig = "safeTransferFrom(address,address,uint256,uint256,bytes)"
    types = ["address", "address", "uint256", "uint256", "bytes"]
    data = calldata(sig, types, [ADDR["gov"], RCPT, 1, 3, b"for you"])
    p = {"amount": "3", "memo": "for you"}
    state = dict(
        before={"recipient_items": 0, "agent_items": 10}, after={"recipient_items": 3, "agent_items": 7}
    )
    good = ctx(params=p, txs=[tx(to=ADDR["multi"], data=data)], **state)
    plain = at._1155_checks(good, False)
    assert failed(plain) == [] and earned(plain) == 100 and len(plain) == 6
    memo = at._1155_checks(good, True)
    assert failed(memo) == [] and earned(memo) == 100 and by_name(memo)["data_attached"]
    other = calldata(sig, types, [ADDR["gov"], RCPT, 1, 3, b"for me"])
    assert failed(at._1155_checks(ctx(params=p, txs=[tx(to=ADDR["multi"], data=other)], **state), True)) == [
        "data_attached"
    ]
    broken = sel(sig) + "zz"
    checks = at._1155_checks(ctx(params=p, txs=[tx(to=ADDR["multi"], data=broken)], **state), True)
    assert failed(checks) == ["data_attached"] and checks[-1].detail.startswith("got undecodable")
    wrong_fn = sel("safeBatchTransferFrom(address,address,uint256[],uint256[],bytes)") + data[10:]
    checks = at._1155_checks(ctx(params=p, txs=[tx(to=ADDR["multi"], data=wrong_fn)], **state), True)
    assert failed(checks) == ["function", "data_attached"]
    short = ctx(
        params=p,
        txs=[tx(to=ADDR["multi"], data=data)],
        before=state["before"],
        after={"recipient_items": 2, "agent_items": 7},
    )
    assert failed(at._1155_checks(short, False)) == ["recipient_received"]
    assert earned(at._1155_checks(short, False)) == 75 and earned(at._1155_checks(short, True)) == 85


def swap_ctx(
    out_delta: int, in_delta: int, *, fee: int = 0, exact_out: bool = False, native: str = ""
) -> Ctx:
    """A 1.5-unit swap of stable -> gov (or native in/out); quotes 3 and 1.5 units."""
    p: dict[str, Any] = {"amount": "1.5"}
    if exact_out:
        p["exact_out"] = True
    before = {"agent_native": 10 * E18, "agent_gov": 0, "agent_stable": 10 * E18}
    before.update(quote_out=3 * E18, quote_in=15 * 10**17)
    after = dict(before)
    out_key = "agent_native" if native == "out" else "agent_gov"
    in_key = "agent_native" if native == "in" else "agent_stable"
    after[out_key] = before[out_key] + out_delta
    after[in_key] = before[in_key] - in_delta
    if native:
        after["agent_native"] -= fee
    return ctx(params=p, before=before, after=after, txs=[tx(to=ADDR["router"], data=sel("swap()"), fee=fee)])


def test_swap_checks_exact_in_both_sides_of_the_quote() -> None:
    sigs = ["swap()"]
    amount = 15 * 10**17
    quote = 3 * E18
    lo, hi = quote - quote * 2 // 100, quote + quote * 2 // 100
    assert failed(at._swap_checks(swap_ctx(lo, amount), sigs, "gov", "stable")) == []
    assert failed(at._swap_checks(swap_ctx(hi, amount), sigs, "gov", "stable")) == []
    assert failed(at._swap_checks(swap_ctx(lo - 1, amount), sigs, "gov", "stable")) == ["received_quote"]
    assert failed(at._swap_checks(swap_ctx(hi + 1, amount), sigs, "gov", "stable")) == ["received_quote"]
    assert failed(at._swap_checks(swap_ctx(quote, amount + 1), sigs, "gov", "stable")) == ["spent_exact"]
    assert failed(at._swap_checks(swap_ctx(quote, amount), ["other()"], "gov", "stable")) == ["function"]
    assert [c.weight for c in at._swap_checks(swap_ctx(quote, amount), sigs, "gov", "stable")] == [
        30,
        15,
        15,
        15,
        15,
        10,
    ]


def test_swap_checks_native_sides_add_back_the_fee() -> None:
    sigs = ["swap()"]
    amount, fee = 15 * 10**17, 10**15
    native_in = swap_ctx(3 * E18, amount, fee=fee, native="in")
    assert failed(at._swap_checks(native_in, sigs, "gov", "native")) == []
    native_out = swap_ctx(3 * E18, amount, fee=fee, native="out")
    assert failed(at._swap_checks(native_out, sigs, "native", "stable")) == []
    # without adding the fee back the amounts would be off by 1e15: here they are off, so it fails
    off = swap_ctx(3 * E18, amount + fee, fee=0, native="in")
    assert failed(at._swap_checks(off, sigs, "gov", "native")) == ["spent_exact"]


def test_swap_checks_exact_out() -> None:
    sigs = ["swap()"]
    want_out, quote_in = 15 * 10**17, 15 * 10**17
    lo, hi = quote_in - quote_in // 100, quote_in + quote_in // 100
    assert failed(at._swap_checks(swap_ctx(want_out, lo, exact_out=True), sigs, "gov", "stable")) == []
    assert failed(at._swap_checks(swap_ctx(want_out, hi, exact_out=True), sigs, "gov", "stable")) == []
    assert failed(at._swap_checks(swap_ctx(want_out, hi + 1, exact_out=True), sigs, "gov", "stable")) == [
        "spent_quoted"
    ]
    assert failed(at._swap_checks(swap_ctx(want_out, lo - 1, exact_out=True), sigs, "gov", "stable")) == [
        "spent_quoted"
    ]
    checks = at._swap_checks(swap_ctx(want_out + 1, quote_in, exact_out=True), sigs, "gov", "stable")
    assert failed(checks) == ["received_exact"] and earned(checks) == 80


def test_add_liquidity_checks() -> None:
    fee = 10**14
    eth_sig = sel("addLiquidityETH(address,uint256,uint256,uint256,address,uint256)")
    v = ctx(
        params={"amount": "2", "pair": "pair_wrapped_stable"},
        before={"agent_native": 10 * E18, "agent_pair_wrapped_stable": 0},
        after={"agent_native": 8 * E18 - fee, "agent_pair_wrapped_stable": 1},
        txs=[tx(to=ADDR["router"], data=eth_sig, fee=fee, gas_used=600_000)],
    )
    assert failed(at._add_liq_checks(v)) == [] and earned(at._add_liq_checks(v)) == 100
    v.after["agent_pair_wrapped_stable"] = 0
    assert failed(at._add_liq_checks(v)) == ["lp_minted"]
    tt_sig = sel("addLiquidity(address,address,uint256,uint256,uint256,uint256,address,uint256)")
    v = ctx(
        params={"amount": "2", "pair": "pair_stable_stable2"},
        before={"agent_stable": 10 * E18, "agent_pair_stable_stable2": 5},
        after={"agent_stable": 8 * E18 + 1, "agent_pair_stable_stable2": 9},
        txs=[tx(to=ADDR["router"], data=tt_sig, gas_used=600_001)],
    )
    assert failed(at._add_liq_checks(v)) == ["deposited_amount", "gas_sane"]
    v.txs[0] = tx(to=ADDR["router"], data=eth_sig)
    assert "function" in failed(at._add_liq_checks(v))


def test_remove_liquidity_checks() -> None:
    eth_sig = sel("removeLiquidityETH(address,uint256,uint256,uint256,address,uint256)")
    base = {
        "agent_pair_wrapped_stable": 1_000,
        "agent_native": 10 * E18,
        "agent_stable": 0,
        "agent_stable2": 0,
    }
    v = ctx(
        params={"pair": "pair_wrapped_stable", "percent": "30"},
        before=dict(base),
        after={**base, "agent_pair_wrapped_stable": 700, "agent_native": 10 * E18 - 5 + 1, "agent_stable": 9},
        txs=[tx(to=ADDR["router"], data=eth_sig, fee=5)],
    )
    assert failed(at._remove_checks(v)) == [] and earned(at._remove_checks(v)) == 100
    v.after["agent_native"] = 10 * E18 - 5  # the coin did not come back (only the fee went)
    assert failed(at._remove_checks(v)) == ["tokens_returned"]
    v.after.update(agent_native=10 * E18, agent_pair_wrapped_stable=699)
    assert failed(at._remove_checks(v)) == ["lp_burned"]
    tt_sig = sel("removeLiquidity(address,address,uint256,uint256,uint256,address,uint256)")
    base2 = {"agent_pair_stable_stable2": 200, "agent_stable": 0, "agent_stable2": 0}
    v = ctx(
        params={"pair": "pair_stable_stable2", "percent": "50"},
        before=dict(base2),
        after={"agent_pair_stable_stable2": 100, "agent_stable": 4, "agent_stable2": 0},
        txs=[tx(to=ADDR["router"], data=tt_sig)],
    )
    assert failed(at._remove_checks(v)) == ["tokens_returned"]
    v.after["agent_stable2"] = 3
    assert failed(at._remove_checks(v)) == []


def test_stake_checks() -> None:
    dep = sel("deposit(uint256)")
    v = ctx(
        params={"pool": "staking_pool", "amount": "2"},
        before={"staked": 0},
        after={"staked": 2 * E18},
        txs=[tx(to=ADDR["staking_pool"], data=dep, gas_used=400_000)],
    )
    assert failed(at._stake_checks(v)) == [] and earned(at._stake_checks(v)) == 100
    v = ctx(
        params={"pool": "lp_farm", "percent": "40"},
        before={"staked": 0, "agent_stake_token": 1_000},
        after={"staked": 400},
        txs=[tx(to=ADDR["lp_farm"], data=dep, gas_used=400_001)],
    )
    assert failed(at._stake_checks(v)) == ["gas_sane"]
    v.after["staked"] = 399
    assert failed(at._stake_checks(v)) == ["staked_delta", "gas_sane"]
    v.txs[0] = tx(to=ADDR["staking_pool"], data=dep)
    assert failed(at._stake_checks(v)) == ["pool", "staked_delta"]


def test_query_task_checks_are_one_strict_answer() -> None:
    logic = catalog.LOGIC["query_pair_reserves"]
    v = ctx(after={"truth": {"reserve0": 10, "reserve1": 20}}, answers=[{"reserve0": 10, "reserve1": "20"}])
    assert [(c.name, c.weight, c.passed) for c in logic.checks(v)] == [("answer", 100, True)]
    v = ctx(after={"truth": {"reserve0": 10, "reserve1": 20}}, answers=[{"reserve0": 10, "reserve1": 21}])
    assert not logic.checks(v)[0].passed  # off by one base unit: wrong (no 0.1% or 50% slack)


# --- composite helpers and validators -------------------------------------------------------------
def test_all_transactions_succeeded_means_all() -> None:
    assert comp.c_all_ok(ctx(txs=[tx(), tx()]), 20).passed
    assert not comp.c_all_ok(ctx(txs=[tx(), tx(status=0)]), 20).passed
    assert not comp.c_all_ok(ctx(txs=[tx(status=0), tx()]), 20).passed
    assert not comp.c_all_ok(ctx(), 20).passed
    c = comp.c_all_ok(ctx(txs=[tx(), tx(status=0)]), 20)
    assert (c.name, c.weight, c.detail) == (
        "all_transactions_succeeded",
        20,
        "2 transaction(s), statuses [1, 0]",
    )


def test_composite_small_checks() -> None:
    assert comp.c_true("t", 5, 1) == Check("t", 5, True, "") and comp.c_true("t", 5, 0, "d").passed is False
    assert comp.c_close("c", 5, 1_001, 1_000).passed and not comp.c_close("c", 5, 1_002, 1_000).passed
    assert comp.c_close("c", 5, 999, 1_000).passed and not comp.c_close("c", 5, 998, 1_000).passed
    assert not comp.c_close("c", 5, 1_001, 1_000, 0).passed and comp.c_close("c", 5, "7", 7, 0).passed
    assert comp.c_eq_addr("a", 5, RCPT.upper(), RCPT).passed and not comp.c_eq_addr("a", 5, R1, RCPT).passed
    v = ctx(answers=[{"x": 1, "y": 2}, "prose", {"x": "3"}])
    assert comp.c_field(v, "x", 3, 10).passed and comp.c_field(v, "y", 2, 10).passed
    assert not comp.c_field(v, "x", 1, 10).passed and not comp.c_field(v, "z", None, 10).passed
    assert comp.c_field(v, "x", 3, 10).detail == "answered 3, expected 3"
    assert comp.fees(ctx(txs=[tx(fee=2), tx(fee=5, status=0)])) == 7


SWAP_TT_SIG, SWAP_TT_TYPES = comp.SWAP_TT


def swap_tt(amount: int, min_out: int, path: list[str], status: int = 1) -> TxRecord:
    data = calldata(
        "swapExactTokensForTokens(uint256,uint256,address[],address,uint256)",
        ["uint256", "uint256", "address[]", "address", "uint256"],
        [amount, min_out, path, RCPT, 2**40],
    )
    return tx(to=ADDR["router"], data=data, status=status)


def test_calls_decodes_only_successful_calls_of_that_function() -> None:
    good = swap_tt(5, 4, [ADDR["stable"], ADDR["gov"]])
    v = ctx(
        txs=[good, swap_tt(6, 4, [ADDR["gov"]], status=0), tx(data=sel(SWAP_TT_SIG) + "zz"), tx(data="0x")]
    )
    decoded = comp.calls(v, SWAP_TT_SIG, SWAP_TT_TYPES)
    assert len(decoded) == 1 and decoded[0][0] == 5 and decoded[0][1] == 4
    assert [a.lower() for a in decoded[0][2]] == [ADDR["stable"], ADDR["gov"]]
    eth_sig = "swapExactETHForTokens(uint256,address[],address,uint256)"
    types = ["uint256", "address[]", "address", "uint256"]
    buy = tx(data=calldata(eth_sig, types, [1, [ADDR["wrapped"], ADDR["gov"]], RCPT, 9]), value=77)
    v = ctx(txs=[buy, tx(data=buy.data, value=88, status=0), tx(data=sel(eth_sig) + "00")])
    out = comp.swaps_value(v, comp.SWAP_ET)
    assert len(out) == 1 and out[0][0] == 77 and out[0][1][0] == 1


def test_multi_swap_checks() -> None:
    p = {"amount1": "1", "amount2": "2"}
    s, s2 = ADDR["stable"], ADDR["stable2"]
    v = ctx(params=p, txs=[swap_tt(E18, 0, [s, s2]), swap_tt(2 * E18, 0, [s2, s])])
    assert failed(comp._multi_swap_checks(v)) == [] and earned(comp._multi_swap_checks(v)) == 100
    v = ctx(params=p, txs=[swap_tt(E18, 0, [s, s2]), swap_tt(2 * E18, 0, [s2, s], status=0)])
    assert failed(comp._multi_swap_checks(v)) == ["swap_2", "all_transactions_succeeded"]
    v = ctx(params=p, txs=[swap_tt(E18, 0, [s2, s]), swap_tt(2 * E18, 0, [s, s2])])  # directions swapped
    assert failed(comp._multi_swap_checks(v)) == ["swap_1", "swap_2"]
    v = ctx(params=p, txs=[swap_tt(E18 + 1, 0, [s, s2]), swap_tt(2 * E18, 0, [s2, ADDR["gov"], s])])
    assert failed(comp._multi_swap_checks(v)) == ["swap_1"]


def test_multi_token_checks() -> None:
    eth_sig = "swapExactETHForTokens(uint256,address[],address,uint256)"
    types = ["uint256", "address[]", "address", "uint256"]

    def buy(token: str, value: int, status: int = 1) -> TxRecord:
        return tx(
            data=calldata(eth_sig, types, [0, [ADDR["wrapped"], token], RCPT, 9]), value=value, status=status
        )

    p = {"amount1": "1", "amount2": "2"}
    state = dict(before={"stable": 0, "gov": 0}, after={"stable": 5, "gov": 6})
    v = ctx(params=p, txs=[buy(ADDR["stable"], E18), buy(ADDR["gov"], 2 * E18)], **state)
    assert failed(comp._multi_token_checks(v)) == [] and earned(comp._multi_token_checks(v)) == 100
    v = ctx(params=p, txs=[buy(ADDR["stable"], E18), buy(ADDR["gov"], 2 * E18 - 1)], **state)
    assert failed(comp._multi_token_checks(v)) == ["bought_gov"]
    v = ctx(
        params=p,
        txs=[buy(ADDR["stable"], E18), buy(ADDR["gov"], 2 * E18)],
        before=state["before"],
        after={"stable": 0, "gov": 6},
    )
    assert failed(comp._multi_token_checks(v)) == ["bought_stable"]
    v = ctx(params=p, txs=[buy(ADDR["stable"], E18), buy(ADDR["gov"], 2 * E18, status=0)], **state)
    assert failed(comp._multi_token_checks(v)) == ["bought_gov", "all_transactions_succeeded"]


def test_optimized_swap_checks_floor_and_quote() -> None:
    quote = 1_000_000
    p = {"slippage": "5", "amount": "1", "path": ["stable", "gov"]}
    floor = quote * 95 // 100
    lowest = floor * 999 // 1000

    def v(min_out: int, spent: int = E18, answer: Any = quote) -> Ctx:
        return ctx(
            params=p,
            before={"quote_out": quote, "stable": 5 * E18},
            after={"stable": 5 * E18 - spent},
            txs=[swap_tt(E18, min_out, [ADDR["stable"], ADDR["gov"]])],
            answers=[{"expected_output": answer}],
        )

    assert failed(comp._optimized_checks(v(lowest))) == [] and earned(comp._optimized_checks(v(quote))) == 100
    assert failed(comp._optimized_checks(v(lowest - 1))) == ["min_out_protects"]
    assert failed(comp._optimized_checks(v(quote + 1))) == ["min_out_protects"]
    assert failed(comp._optimized_checks(v(floor, spent=E18 + 1))) == ["spent"]
    assert failed(comp._optimized_checks(v(floor, answer=quote + 1))) == ["expected_output"]


def test_split_checks_exact_thirds() -> None:
    share = 10 * E18 // 3
    before = {f"{r}_token": 0 for r in ("r1", "r2", "r3")}
    after = {"r1_token": share, "r2_token": share, "r3_token": share}
    v = ctx(params={"amount": "10"}, before=before, after=after, txs=[tx(), tx(), tx()])
    assert failed(comp._split_checks(v)) == [] and earned(comp._split_checks(v)) == 100
    v = ctx(
        params={"amount": "10"},
        before=before,
        after={**after, "r2_token": share + 1},
        txs=[tx(), tx(status=0)],
    )
    assert failed(comp._split_checks(v)) == ["r2_share", "all_transactions_succeeded"]


def test_triple_lp_checks() -> None:
    add_eth = "addLiquidityETH(address,uint256,uint256,uint256,address,uint256)"
    eth_types = ["address", "uint256", "uint256", "uint256", "address", "uint256"]
    add_tt = "addLiquidity(address,address,uint256,uint256,uint256,uint256,address,uint256)"
    tt_types = ["address", "address", "uint256", "uint256", "uint256", "uint256", "address", "uint256"]

    def eth(token: str, value: int) -> TxRecord:
        return tx(data=calldata(add_eth, eth_types, [token, 1, 0, 0, RCPT, 9]), value=value)

    def tt(a: str, b: str, amount_a: int, amount_b: int) -> TxRecord:
        return tx(data=calldata(add_tt, tt_types, [a, b, amount_a, amount_b, 0, 0, RCPT, 9]))

    p = {"amount1": "1", "amount2": "2", "amount3": "3"}
    lp = ("pair_wrapped_stable", "pair_wrapped_gov", "pair_stable_stable2")
    before, after = dict.fromkeys(lp, 0), dict.fromkeys(lp, 1)
    txs = [
        eth(ADDR["stable"], E18),
        eth(ADDR["gov"], 2 * E18),
        tt(ADDR["stable2"], ADDR["stable"], 7, 3 * E18),
    ]
    v = ctx(params=p, before=before, after=after, txs=txs)
    assert failed(comp._triple_checks(v)) == [] and earned(comp._triple_checks(v)) == 100
    v = ctx(params=p, before=before, after=after, txs=[eth(ADDR["gov"], E18), *txs[1:]])
    assert failed(comp._triple_checks(v)) == ["wrapped_stable_lp"]
    v = ctx(params=p, before=before, after={**after, "pair_wrapped_gov": 0}, txs=txs)
    assert failed(comp._triple_checks(v)) == ["wrapped_gov_lp"]
    v = ctx(
        params=p, before=before, after=after, txs=[*txs[:2], tt(ADDR["stable2"], ADDR["gov"], 3 * E18, 1)]
    )
    assert failed(comp._triple_checks(v)) == ["stable_stable2_lp"]
    v = ctx(params=p, before=before, after=after, txs=[*txs[:2], tt(ADDR["stable"], ADDR["stable2"], 3, 4)])
    assert failed(comp._triple_checks(v)) == ["stable_stable2_lp"]


def test_wrap_cycle_checks() -> None:
    amount = 15 * 10**17
    wrap = tx(to=ADDR["wrapped"], data=sel("deposit()"), value=amount)
    unwrap = tx(to=ADDR["wrapped"], data=calldata("withdraw(uint256)", ["uint256"], [amount]))
    p = {"amount": "1.5"}
    v = ctx(params=p, before={"wrapped": 4}, after={"wrapped": 4}, txs=[wrap, unwrap])
    assert failed(comp._cycle_checks(v)) == [] and earned(comp._cycle_checks(v)) == 100
    v = ctx(params=p, before={"wrapped": 4}, after={"wrapped": 4 + amount}, txs=[wrap])
    assert failed(comp._cycle_checks(v)) == ["unwrapped", "back_to_start"]
    v = ctx(
        params=p,
        before={"wrapped": 4},
        after={"wrapped": 4},
        txs=[tx(data=wrap.data, value=amount - 1), unwrap],
    )
    assert failed(comp._cycle_checks(v)) == ["wrapped"]
    failed_wrap = tx(to=ADDR["wrapped"], data=sel("deposit()"), value=amount, status=0)
    v = ctx(params=p, before={"wrapped": 4}, after={"wrapped": 4}, txs=[failed_wrap, unwrap])
    assert failed(comp._cycle_checks(v)) == ["wrapped"]


# --- the episode score ----------------------------------------------------------------------------
@dataclass
class Probe:
    checks: list[Check]
    answer: Any = None
    boom: bool = False


def scored(
    monkeypatch: pytest.MonkeyPatch,
    probe: Probe,
    *,
    split: str = "atomic",
    txs: list[TxRecord] | None = None,
    answers: list | None = None,
    steps: int = 1,
    closed_by_done: bool = False,
    optimal: int = 2,
    scoring: str = "default",
    task_id: str = "probe_task",
    params: dict | None = None,
    before: dict | None = None,
    after: dict | None = None,
) -> tuple[float, dict]:
    from lynn.envs.evmquest.evmquest_env import EVMQuestEnv

    world = SimpleNamespace(addresses=ADDR)
    params = {"p": 3} if params is None else params
    before = {"b": 1} if before is None else before
    after = {"a": 2} if after is None else after
    txs, answers = list(txs or []), list(answers or [])

    def measure(w: Any, p: dict) -> dict:
        assert w is world and p == params
        return after

    def checks(v: Ctx) -> list[Check]:
        if probe.boom:
            raise KeyError("agent_token")
        assert v.world is world and v.before == before and v.after == after and v.params == params
        assert v.txs == txs and v.answers == answers
        return probe.checks

    logic = kit.TaskLogic(script=lambda p, n: "", checks=checks, measure=measure, answer=probe.answer)
    monkeypatch.setitem(catalog.LOGIC, task_id, logic)
    env = EVMQuestEnv(task="bnb_transfer_basic", scoring=scoring)  # no chain is started
    spec = SimpleNamespace(task_id=task_id, split=split, optimal_steps=optimal)
    env.instance = SimpleNamespace(spec=spec, params=params)  # type: ignore[assignment]
    env.world = world
    env.before, env.txs, env.answers = before, txs, answers
    env.steps, env._closed_by_done = steps, closed_by_done
    return env._score()


PASS_FAIL = [Check("a", 60, True), Check("b", 30, False), Check("c", 10, True)]


def test_score_is_the_weight_of_passed_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    reward, info = scored(monkeypatch, Probe(PASS_FAIL), txs=[tx()])
    assert reward == pytest.approx(0.70) and info["score"] == 70.0 and info["success"] is False
    assert [c["name"] for c in info["checks"]] == ["a", "b", "c"] and "reference_port" not in info
    reward, info = scored(monkeypatch, Probe([Check("a", 60, True), Check("c", 40, True)]), txs=[tx()])
    assert reward == 1.0 and info["success"] is True


def test_no_successful_transaction_earns_nothing_unless_it_is_a_question(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    all_pass = [Check("kept", 100, True)]
    assert scored(monkeypatch, Probe(all_pass), txs=[])[0] == 0.0
    reward, info = scored(monkeypatch, Probe(all_pass), txs=[tx(status=0), tx(status=0)])
    assert reward == 0.0 and info["score"] == 0.0
    assert scored(monkeypatch, Probe(all_pass), txs=[tx(status=0), tx(status=1)])[0] == 1.0
    from lynn.envs.evmquest.answers import AnswerSpec

    assert scored(monkeypatch, Probe(all_pass, answer=AnswerSpec()), txs=[], answers=[5])[0] == 1.0


def test_composite_decay_counts_rounds_but_not_the_closing_done(monkeypatch: pytest.MonkeyPatch) -> None:
    full = [Check("a", 100, True)]
    kw = dict(split="composite", txs=[tx()], optimal=2)
    assert scored(monkeypatch, Probe(full), steps=2, **kw)[0] == 1.0
    assert scored(monkeypatch, Probe(full), steps=3, closed_by_done=True, **kw)[0] == 1.0
    assert scored(monkeypatch, Probe(full), steps=1, **kw)[0] == 1.0  # under the optimum: no bonus
    reward, info = scored(monkeypatch, Probe(full), steps=4, **kw)
    assert reward == pytest.approx(0.5) and info["success"] is True
    reward, info = scored(monkeypatch, Probe(full), steps=5, closed_by_done=True, **kw)
    assert reward == pytest.approx(0.5)
    reward, info = scored(monkeypatch, Probe(PASS_FAIL), steps=4, **kw)
    assert reward == pytest.approx(0.35) and info["success"] is False
    reward, info = scored(monkeypatch, Probe(full), steps=1, closed_by_done=True, **kw)
    assert reward == 0.0 and info["success"] is False  # only the closing done: no round was played
    from lynn.envs.evmquest.answers import AnswerSpec

    reward, info = scored(
        monkeypatch, Probe(full, answer=AnswerSpec()), split="composite", steps=2, optimal=2
    )
    assert reward == 0.0 and info["success"] is False  # neither a tx nor an answer: decay 0
    reward, info = scored(
        monkeypatch, Probe([], answer=AnswerSpec()), split="composite", answers=[1], steps=1
    )
    assert reward == 0.0 and info["success"] is False  # no checks is no success


def test_a_validator_error_is_a_zero_score_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    reward, info = scored(monkeypatch, Probe(PASS_FAIL, boom=True), txs=[tx()])
    assert reward == 0.0
    assert info == {"checks": [], "score": 0.0, "success": False, "error": "validation failed: 'agent_token'"}


def test_reference_profile_on_an_unported_task_keeps_our_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    reward, info = scored(monkeypatch, Probe(PASS_FAIL), txs=[tx()], scoring="reference")
    assert reward == pytest.approx(0.70) and info["reference_port"] is False


def test_reference_profile_scores_a_ported_atomic_task_by_its_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    want, fee = 15 * 10**17, 21_000 * 10**9
    sent = TxRecord(RCPT, "0x", want, 1, 21_000, fee, "0x1", gas_limit=50_000)
    kw = dict(
        task_id="bnb_transfer_basic",
        params={"amount": "1.5", "recipient": RCPT},
        before={"agent_native": 10 * E18},
        scoring="reference",
        txs=[sent],
    )
    reward, info = scored(monkeypatch, Probe([]), after={"agent_native": 10 * E18 - want - fee}, **kw)
    assert (
        reward == 1.0 and info["success"] is True and info["reference_port"] is True and "decay" not in info
    )
    assert [c["name"] for c in info["checks"]] == [
        "transaction_success",
        "target_address",
        "amount",
        "gas_settings",
        "balance_change",
    ]
    reward, info = scored(monkeypatch, Probe([]), after={"agent_native": 10 * E18 - want * 98 // 100}, **kw)
    assert reward == pytest.approx(0.9) and info["success"] is False  # the balance moved 2% less than sent


def test_reference_profile_scores_composites_by_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    kw = dict(split="composite", scoring="reference", txs=[tx(status=0)])
    reward, info = scored(monkeypatch, Probe([]), steps=6, **kw)  # default optimum 3: decay 3/6
    assert reward == pytest.approx(0.5) and info["decay"] == pytest.approx(0.5) and info["success"] is False
    assert info["reference_port"] is True and [c["name"] for c in info["checks"]] == ["transaction_executed"]
    reward, info = scored(monkeypatch, Probe([]), steps=4, closed_by_done=True, **kw)
    assert reward == 1.0 and info["decay"] == 1.0 and info["success"] is True
    reward, info = scored(monkeypatch, Probe([]), steps=5, **kw)
    assert reward == pytest.approx(0.6) and info["success"] is True  # the reference's pass mark is 60
    reward, info = scored(monkeypatch, Probe([]), split="composite", scoring="reference", steps=2, txs=[])
    assert reward == 0.0 and info["success"] is False


def test_atomic_scores_ignore_the_round_count(monkeypatch: pytest.MonkeyPatch) -> None:
    reward, info = scored(monkeypatch, Probe(PASS_FAIL), txs=[tx()], steps=5, optimal=2)
    assert reward == pytest.approx(0.70) and "decay" not in info


def test_reference_composite_rounds_leave_out_only_the_closing_done(monkeypatch: pytest.MonkeyPatch) -> None:
    kw = dict(split="composite", scoring="reference", txs=[tx()])
    reward, info = scored(monkeypatch, Probe([]), steps=5, closed_by_done=True, **kw)  # 4 rounds, optimum 3
    assert reward == pytest.approx(0.75) and info["score"] == pytest.approx(75.0)
    reward, info = scored(monkeypatch, Probe([]), task_id="composite_wrap_unwrap_cycle", steps=2, **kw)
    from lynn.envs.evmquest.reference import composite_steps

    optimal = composite_steps("composite_wrap_unwrap_cycle")[0]
    assert info["decay"] == pytest.approx(min(1.0, optimal / 2))
