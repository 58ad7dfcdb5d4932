"""Ported reference validators (batch 2 onwards), side by side with a re-statement of each.

Each ``ref_*`` function restates one validator of the public reference (``Amorth/bsc_quest_bench``,
``validators/<task>_validator.py``) in its own terms: raw ``tx``/``receipt`` dicts and the
``state_before``/``state_after`` snapshots its executor takes (``balance``, ``token_balance``,
``target_token_balance``, ``allowance``, ...). Every hand-built case is scored by the restatement and
by our reference profile (:func:`lynn.envs.evmquest.reference.score_atomic`) and the two must give
the same score and the same pass/fail.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest

from lynn.envs.evmquest import reference
from lynn.envs.evmquest.taskkit import Ctx, TxRecord, selector, wei

E18 = 10**18
GWEI = 10**9
RECIPIENT = "0x" + "ab" * 20
OTHER = "0x" + "cd" * 20
ZERO = "0x" + "00" * 20
ADDR = {
    "stable": "0x" + "22" * 20,
    "stable2": "0x" + "23" * 20,
    "gov": "0x" + "24" * 20,
    "wrapped": "0x" + "11" * 20,
    "fallback": "0x" + "44" * 20,
    "nft": "0x" + "33" * 20,
}
WORLD = SimpleNamespace(addresses=ADDR)


def word(x: int | str) -> str:
    if isinstance(x, str):
        return x[2:].lower().rjust(64, "0")
    return hex(x)[2:].rjust(64, "0")


def call(signature: str, *args: int | str) -> str:
    return selector(signature) + "".join(word(a) for a in args)


# ----------------------------------------------------------------------------- the reference, restated
def _ok(receipt: dict) -> bool:
    return receipt.get("status") == 1


def _fee(receipt: dict) -> int:
    return receipt.get("gasUsed", 0) * receipt.get("effectiveGasPrice", 0)


def _sel(tx: dict) -> str:
    data = tx.get("data") or "0x"
    return data[:10].lower() if len(data) >= 10 else ""


def _arg(tx: dict, i: int) -> int:
    return int(tx["data"][10 + 64 * i : 74 + 64 * i], 16)


def ref_bnb_max(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    if not _ok(rc):
        return 0, False
    score = 30 + (20 if tx["to"].lower() == p["recipient"].lower() else 0)
    expected = sb["balance"] - _fee(rc)
    score += 30 if abs(tx["value"] - expected) <= max(int(expected * 0.001), 1000) else 0
    score += 20 if sa["balance"] <= 10**14 else 0
    return score, score >= 80


def ref_bnb_to_contract(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    if not _ok(rc):
        return 0, False
    amount = wei(p["amount"])
    score = 30 + (20 if tx["to"].lower() == ADDR["fallback"] and sb["contract_code_size"] > 0 else 0)
    score += 30 if tx["value"] == amount else 0
    diff = abs(sa["target_balance"] - (sb["target_balance"] + amount))
    score += 20 if diff <= max(int(amount * 0.001), 1) else 0
    return score, score >= 80


def ref_bnb_message(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    if not _ok(rc):
        return 0, False
    amount = wei(p["amount"])
    score = 20 + (20 if tx["to"].lower() == p["recipient"].lower() else 0)
    score += 20 if tx["value"] == amount else 0
    data = tx.get("data", "0x")
    if data and data != "0x":
        raw = bytes.fromhex(data[2:])
        try:
            text = raw.decode("utf-8")
            hit = p["message"] in text or text.strip() == p["message"].strip()
        except UnicodeDecodeError:
            hit = p["message"] in raw.decode("ascii", errors="ignore")
        score += 30 if hit else 0
    expected = sb["balance"] - amount - _fee(rc)
    score += 10 if abs(sa["balance"] - expected) <= max(int(amount * 0.001), 1) else 0
    return score, score >= 80


def ref_erc20_percentage(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    expected = int(sb["token_balance"] * p["percent"] / 100)
    if not _ok(rc):
        return 0, False
    score = 30 + (20 if tx["to"].lower() == ADDR[p["token"]] else 0)
    score += 10 if _sel(tx) == "0xa9059cbb" else 0
    tol = int(expected * 0.001)
    score += 30 if abs(sb["token_balance"] - sa["token_balance"] - expected) <= tol else 0
    score += 10 if abs(sa["target_token_balance"] - sb["target_token_balance"] - expected) <= tol else 0
    return score, score >= 80


def ref_erc20_max(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    if not _ok(rc):
        return 0, False
    score = 30 + (20 if tx["to"].lower() == ADDR[p["token"]] else 0)
    score += 10 if _sel(tx) == "0xa9059cbb" else 0
    moved, full = sb["token_balance"] - sa["token_balance"], sb["token_balance"]
    score += 20 if abs(moved - full) <= max(int(full * 0.001), 1) else 0
    score += 20 if sa["token_balance"] <= 10**16 else 0
    return score, score >= 80


def _ref_allowance(sig: str, mode: str) -> Callable[..., tuple[int, bool]]:
    def validate(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
        if not _ok(rc):
            return 0, False
        oks = [True, tx["data"].startswith(sig)]
        amount = _arg(tx, 1) if oks[1] and len(tx["data"]) >= 138 else wei(p["amount"])
        change = {
            "set": sa["allowance"],
            "increase": sa["allowance"] - sb["allowance"],
            "decrease": sb["allowance"] - sa["allowance"],
        }[mode]
        oks += [change == amount, sb["token_balance"] == sa["token_balance"]]
        return sum(w for w, o in zip((30, 20, 40, 10), oks, strict=True) if o), all(oks)

    return validate


def ref_revoke(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    if not _ok(rc):
        return 0, False
    score = 30 + (20 if tx["to"].lower() == ADDR[p["token"]] else 0)
    score += 20 if _sel(tx) == "0x095ea7b3" else 0
    score += 30 if sa["allowance"] == 0 else 0
    return score, score >= 80


def ref_burn(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    if not _ok(rc):
        return 0, False
    amount = wei(p["amount"])
    score = 30 + (20 if tx["to"].lower() == ADDR[p["token"]] else 0)
    if _sel(tx) == "0xa9059cbb" and len(tx["data"]) >= 74 and "0x" + tx["data"][34:74] == ZERO:
        score += 20
    score += (
        30 if abs(sb["token_balance"] - sa["token_balance"] - amount) <= (int(amount * 0.001) or 1) else 0
    )
    return score, score >= 80


def ref_transfer_from(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    if not _ok(rc):
        return 20 * 0, False
    oks = [True, tx["data"].startswith("0x23b872dd")]
    amount = _arg(tx, 2) if oks[1] and len(tx["data"]) >= 202 else wei(p["amount"])
    tol = amount * 0.001
    oks += [
        abs(sb["allowance"] - sa["allowance"] - amount) <= tol,
        abs(sb["token_balance"] - sa["token_balance"] - amount) <= tol,
        abs(sa["target_token_balance"] - sb["target_token_balance"] - amount) <= tol,
    ]
    return sum(20 for o in oks if o), all(oks)


# ----------------------------------------------------------------------------- cases
@dataclass
class Case:
    """A hand-built episode: params, the transaction, our measured state and the reference's."""

    name: str
    params: dict[str, Any]
    tx: TxRecord
    before: dict[str, Any]
    after: dict[str, Any]
    ref_before: dict[str, Any] = field(default_factory=dict)
    ref_after: dict[str, Any] = field(default_factory=dict)


def tx(to: str, data: str = "0x", value: int = 0, status: int = 1, gas_used: int = 50_000) -> TxRecord:
    return TxRecord(to, data, value, status, gas_used, gas_used * GWEI, "0x", gas_limit=2 * gas_used)


def as_reference(t: TxRecord) -> tuple[dict, dict]:
    return (
        {"to": t.to, "data": t.data, "value": t.value, "gas": t.gas_limit},
        {"status": t.status, "gasUsed": t.gas_used, "effectiveGasPrice": t.fee // max(t.gas_used, 1)},
    )


def native_states(balance: int, after: int, **ref: int) -> tuple[dict, dict, dict, dict]:
    return {"agent_native": balance}, {"agent_native": after}, {"balance": balance}, {"balance": after}


def bnb_max_cases() -> list[Case]:
    bal = 5 * E18
    good = tx(RECIPIENT, value=bal - 21_000 * GWEI, gas_used=21_000)
    fee = good.fee
    out = []
    for name, t, left in [
        ("all_but_fee", good, 0),
        ("kept_a_little", tx(RECIPIENT, value=bal - fee - 10**13, gas_used=21_000), 10**13),
        (
            "kept_one_percent",
            tx(RECIPIENT, value=bal * 99 // 100, gas_used=21_000),
            bal - bal * 99 // 100 - fee,
        ),
        ("wrong_recipient", tx(OTHER, value=bal - fee, gas_used=21_000), 0),
        ("reverted", tx(RECIPIENT, value=bal - fee, status=0, gas_used=21_000), bal - fee),
    ]:
        b, a, rb, ra = native_states(bal, left)
        out.append(Case(name, {"recipient": RECIPIENT}, t, b, a, rb, ra))
    return out


def bnb_contract_cases() -> list[Case]:
    amount, bal = wei("0.2"), 5 * E18
    out = []
    for name, t, credited in [
        ("correct", tx(ADDR["fallback"], value=amount), amount),
        ("value_off_by_1_wei", tx(ADDR["fallback"], value=amount + 1), amount + 1),
        ("value_off_2%", tx(ADDR["fallback"], value=amount * 102 // 100), amount * 102 // 100),
        ("wrong_target", tx(OTHER, value=amount), 0),
        ("reverted", tx(ADDR["fallback"], value=amount, status=0), 0),
    ]:
        b = {"agent_native": bal, "ref_target_native": 7}
        a = {"agent_native": bal - t.value - t.fee, "ref_target_native": 7 + credited}
        out.append(
            Case(
                name,
                {"amount": "0.2"},
                t,
                b,
                a,
                {"balance": bal, "target_balance": 7, "contract_code_size": 900},
                {"balance": a["agent_native"], "target_balance": 7 + credited},
            )
        )
    return out


def bnb_message_cases() -> list[Case]:
    amount, bal, msg = wei("0.1"), 5 * E18, "gm lynn"
    hexmsg = "0x" + msg.encode().hex()
    out = []
    for name, t, spent_extra in [
        ("correct", tx(RECIPIENT, hexmsg, amount, gas_used=21_500), 0),
        ("message_inside_longer_text", tx(RECIPIENT, "0x" + ("hi " + msg).encode().hex(), amount), 0),
        ("no_message", tx(RECIPIENT, "0x", amount, gas_used=21_000), 0),
        ("not_utf8", tx(RECIPIENT, "0xff" + msg.encode().hex(), amount), 0),
        ("wrong_amount", tx(RECIPIENT, hexmsg, amount + 1), 0),
        ("balance_mismatch", tx(RECIPIENT, hexmsg, amount), amount),
        ("reverted", tx(RECIPIENT, hexmsg, amount, status=0), 0),
    ]:
        after = bal - t.value - t.fee - spent_extra
        b, a, rb, ra = native_states(bal, after)
        out.append(Case(name, {"recipient": RECIPIENT, "amount": "0.1", "message": msg}, t, b, a, rb, ra))
    return out


def erc20_states(agent: tuple[int, int], recipient: tuple[int, int]) -> tuple[dict, dict, dict, dict]:
    return (
        {"agent_token": agent[0], "recipient_token": recipient[0], "allowance": 0},
        {"agent_token": agent[1], "recipient_token": recipient[1], "allowance": 0},
        {"token_balance": agent[0], "target_token_balance": recipient[0]},
        {"token_balance": agent[1], "target_token_balance": recipient[1]},
    )


def erc20_share_cases() -> list[Case]:
    bal = 333 * E18 + 7
    want = int(bal * 25 / 100)
    transfer = call("transfer(address,uint256)", RECIPIENT, want)
    out = []
    for name, t, moved in [
        ("correct", tx(ADDR["stable"], transfer), want),
        ("within_0.1%", tx(ADDR["stable"], transfer), want + want // 2000),
        ("off_1%", tx(ADDR["stable"], transfer), want * 101 // 100),
        ("other_selector_passes_at_90", tx(ADDR["stable"], "0x12345678" + transfer[10:]), want),
        ("wrong_token", tx(ADDR["gov"], transfer), 0),
        ("reverted", tx(ADDR["stable"], transfer, status=0), 0),
    ]:
        b, a, rb, ra = erc20_states((bal, bal - moved), (5, 5 + moved))
        out.append(Case(name, {"token": "stable", "recipient": RECIPIENT, "percent": 25}, t, b, a, rb, ra))
    return out


def erc20_max_cases() -> list[Case]:
    bal = 77 * E18 + 3
    transfer = call("transfer(address,uint256)", RECIPIENT, bal)
    out = []
    for name, t, moved in [
        ("everything", tx(ADDR["stable2"], transfer), bal),
        ("left_dust", tx(ADDR["stable2"], transfer), bal - 10**15),
        ("left_one_token", tx(ADDR["stable2"], transfer), bal - E18),
        ("half", tx(ADDR["stable2"], transfer), bal // 2),
        ("wrong_token", tx(ADDR["stable"], transfer), 0),
        ("reverted", tx(ADDR["stable2"], transfer, status=0), 0),
    ]:
        b, a, rb, ra = erc20_states((bal, bal - moved), (0, moved))
        out.append(Case(name, {"token": "stable2", "recipient": RECIPIENT}, t, b, a, rb, ra))
    return out


def allowance_cases(sig: str, mode: str) -> list[Case]:
    amount, initial = wei("12.5"), wei("40")
    good = call(sig, RECIPIENT, amount)
    allowed = {"set": amount, "increase": initial + amount, "decrease": initial - amount}[mode]
    other_amount = {"set": 3 * amount, "increase": initial + 3 * amount, "decrease": initial - 3 * amount}[
        mode
    ]
    out = []
    for name, t, allowance_after, balance_moved in [
        ("correct", tx(ADDR["gov"], good), allowed, 0),
        # Another spender: the instructed spender's allowance (what both read) does not move.
        ("other_spender", tx(ADDR["gov"], call(sig, OTHER, amount)), 0 if mode == "set" else initial, 0),
        ("other_amount_loophole", tx(ADDR["gov"], call(sig, RECIPIENT, amount * 3)), other_amount, 0),
        ("allowance_wrong", tx(ADDR["gov"], good), allowed + 1, 0),
        (
            "plain_approve_instead",
            tx(ADDR["gov"], call("approve(address,uint256)", RECIPIENT, allowed)),
            allowed,
            0,
        ),
        ("tokens_moved", tx(ADDR["gov"], good), allowed, 5),
        ("short_calldata", tx(ADDR["gov"], good[:80]), allowed, 0),
        ("reverted", tx(ADDR["gov"], good, status=0), initial, 0),
    ]:
        start = 0 if mode == "set" else initial
        b = {"allowance": start, "agent_token": 9 * E18}
        a = {"allowance": allowance_after, "agent_token": 9 * E18 - balance_moved}
        rb = {"allowance": start, "token_balance": 9 * E18}
        ra = {"allowance": allowance_after, "token_balance": 9 * E18 - balance_moved}
        out.append(Case(name, {"token": "gov", "spender": RECIPIENT, "amount": "12.5"}, t, b, a, rb, ra))
    return out


def revoke_cases() -> list[Case]:
    good = call("approve(address,uint256)", RECIPIENT, 0)
    out = []
    for name, t, after in [
        ("correct", tx(ADDR["stable"], good), 0),
        ("not_zero", tx(ADDR["stable"], call("approve(address,uint256)", RECIPIENT, 1)), 1),
        ("decrease_to_zero_other_selector", tx(ADDR["stable"], "0xa457c2d7" + good[10:]), 0),
        ("wrong_token", tx(ADDR["gov"], good), 0),
        ("reverted", tx(ADDR["stable"], good, status=0), 5),
    ]:
        out.append(
            Case(
                name, {"token": "stable", "spender": RECIPIENT}, t, {"allowance": 5}, {"allowance": after},
                {"allowance": 5}, {"allowance": after},
            )
        )  # fmt: skip
    return out


def burn_cases() -> list[Case]:
    amount = wei("3.5")
    out = []
    for name, t, burned in [
        ("burn_function_scores_80", tx(ADDR["gov"], call("burn(uint256)", amount)), amount),
        ("transfer_to_zero", tx(ADDR["gov"], call("transfer(address,uint256)", ZERO, amount)), amount),
        ("transfer_elsewhere", tx(ADDR["gov"], call("transfer(address,uint256)", OTHER, amount)), amount),
        ("burned_too_much", tx(ADDR["gov"], call("burn(uint256)", amount * 2)), amount * 2),
        ("reverted", tx(ADDR["gov"], call("burn(uint256)", amount), status=0), 0),
    ]:
        b, a, rb, ra = erc20_states((50 * E18, 50 * E18 - burned), (0, 0))
        out.append(Case(name, {"token": "gov", "amount": "3.5"}, t, b, a, rb, ra))
    return out


def transfer_from_cases() -> list[Case]:
    amount = wei("8")
    sig = "transferFrom(address,address,uint256)"
    out = []
    for name, t, moved in [
        ("correct", tx(ADDR["stable"], call(sig, OTHER, RECIPIENT, amount)), amount),
        ("other_amount_loophole", tx(ADDR["stable"], call(sig, OTHER, RECIPIENT, amount * 2)), amount * 2),
        ("state_disagrees", tx(ADDR["stable"], call(sig, OTHER, RECIPIENT, amount)), amount * 2),
        ("plain_transfer", tx(ADDR["stable"], call("transfer(address,uint256)", RECIPIENT, amount)), 0),
        ("reverted", tx(ADDR["stable"], call(sig, OTHER, RECIPIENT, amount), status=0), 0),
    ]:
        b = {"friend_token": 100 * E18, "recipient_token": 0, "allowance": 50 * E18}
        a = {"friend_token": 100 * E18 - moved, "recipient_token": moved, "allowance": 50 * E18 - moved}
        rb = {"token_balance": 100 * E18, "target_token_balance": 0, "allowance": 50 * E18}
        ra = {"token_balance": a["friend_token"], "target_token_balance": moved, "allowance": a["allowance"]}
        out.append(Case(name, {"owner": OTHER, "recipient": RECIPIENT, "amount": "8"}, t, b, a, rb, ra))
    return out


PORTS: dict[str, tuple[Callable[..., tuple[int, bool]], Callable[[], list[Case]]]] = {
    "bnb_transfer_max_amount": (ref_bnb_max, bnb_max_cases),
    "bnb_transfer_to_contract": (ref_bnb_to_contract, bnb_contract_cases),
    "bnb_transfer_with_message": (ref_bnb_message, bnb_message_cases),
    "erc20_transfer_percentage": (ref_erc20_percentage, erc20_share_cases),
    "erc20_transfer_max_amount": (ref_erc20_max, erc20_max_cases),
    "erc20_approve": (
        _ref_allowance("0x095ea7b3", "set"),
        lambda: allowance_cases("approve(address,uint256)", "set"),
    ),
    "erc20_increase_allowance": (
        _ref_allowance("0x39509351", "increase"),
        lambda: allowance_cases("increaseAllowance(address,uint256)", "increase"),
    ),
    "erc20_decrease_allowance": (
        _ref_allowance("0xa457c2d7", "decrease"),
        lambda: allowance_cases("decreaseAllowance(address,uint256)", "decrease"),
    ),
    "erc20_revoke_approval": (ref_revoke, revoke_cases),
    "erc20_burn": (ref_burn, burn_cases),
    "erc20_transferfrom_basic": (ref_transfer_from, transfer_from_cases),
}
CASES = [(task_id, c) for task_id, (_, make) in PORTS.items() for c in make()]


@pytest.mark.parametrize(("task_id", "case"), CASES, ids=[f"{t}-{c.name}" for t, c in CASES])
def test_port_matches_the_reference(task_id: str, case: Case) -> None:
    ref, _ = PORTS[task_id]
    ctx = Ctx(WORLD, case.params, case.before, case.after, [case.tx], [])  # type: ignore[arg-type]
    score, success, checks = reference.score_atomic(task_id, ctx)
    theirs = ref(*as_reference(case.tx), case.ref_before, case.ref_after, case.params)
    assert (score, success) == (float(theirs[0]), theirs[1]), (case.name, [c.as_dict() for c in checks])


def test_every_port_has_cases_that_pass_and_fail() -> None:
    for task_id, (ref, make) in PORTS.items():
        results = {ref(*as_reference(c.tx), c.ref_before, c.ref_after, c.params)[1] for c in make()}
        assert results == {True, False}, task_id
        assert reference.is_ported(task_id, "atomic"), task_id


# ----------------------------------------------------------------------------- queries, restated
def _int(raw: Any) -> int:
    return int(raw) if isinstance(raw, str) else int(raw)


def _pct(got: int, want: int) -> float:
    return abs(got - want) / want * 100 if want > 0 else (0 if got == 0 else 100)


def ref_q_allowance(qr: dict, sb: dict) -> tuple[int, bool]:
    if not qr.get("success"):
        return 0, False
    data = qr.get("data", {})
    if "allowance_raw" not in data:
        return 30, False
    raw = data["allowance_raw"]
    try:
        got = int(raw, 16) if isinstance(raw, str) and raw.startswith("0x") else int(raw)
    except (TypeError, ValueError):
        return 60, False
    return (100, True) if got == sb["allowance"] else (60, False)


def ref_q_reserves(qr: dict, sb: dict) -> tuple[int, bool]:
    if not qr.get("success"):
        return 0, False
    data = qr.get("data", {})
    if any(f not in data for f in ("reserve0", "reserve1", "blockTimestampLast")):
        return 30, False
    try:
        r0, r1, ts = (
            int(data[k]) if isinstance(data[k], str) else data[k]
            for k in ("reserve0", "reserve1", "blockTimestampLast")
        )
    except ValueError:
        return 60, False
    if (r0, r1, ts) == (sb["reserve0"], sb["reserve1"], sb["blockTimestampLast"]):
        return 100, True

    def near(x: int, want: int) -> bool:
        return abs(x - want) / max(want, 1) < 0.01 if want > 0 else x == 0

    return (95, True) if near(r0, sb["reserve0"]) and near(r1, sb["reserve1"]) else (60, False)


def ref_q_swap_out(qr: dict, sb: dict) -> tuple[int, bool]:
    if not qr.get("success"):
        return 0, False
    data = qr.get("data", {})
    if "amounts" not in data:
        return 30, False
    try:
        got = data["amounts"]
        got = json.loads(got) if isinstance(got, str) else got
        got = [int(a) if isinstance(a, str) else a for a in got]
    except (ValueError, TypeError):
        return 60, False
    want = sb["expected_amounts"]
    if len(got) != len(want):
        return 60, False
    if got[-1] == want[-1]:
        return 100, True
    return (95, True) if abs(got[-1] - want[-1]) / max(want[-1], 1) < 0.01 else (60, False)


def ref_q_swap_in(qr: dict, sb: dict) -> tuple[int, bool]:
    if not qr.get("success"):
        return 0, False
    data = qr.get("data", {})
    score = 30 + (30 if all(f in data for f in ("amounts", "amount_in", "amount_out")) else 0)
    want = sb["expected_amounts"]
    try:
        amounts = data.get("amounts", [])
        if isinstance(amounts, list) and len(amounts) >= 2:
            got_in, got_out = int(amounts[0]), int(amounts[-1])
        else:
            got_in, got_out = int(data.get("amount_in", 0)), int(data.get("amount_out", 0))
        d_in = abs(got_in - want[0]) / want[0] * 100 if want[0] > 0 else 0
        d_out = abs(got_out - want[-1]) / want[-1] * 100 if want[-1] > 0 else 0
        score += 40 if d_in <= 1 and d_out <= 1 else max(0, int(40 * (1 - min(d_in, d_out) / 10)))
    except (ValueError, TypeError):
        pass
    return score, score >= 60


def _ref_q_graded(
    fields: tuple[str, ...], key: str, state: str, weights: tuple[int, int, int], within: float, slope: float
) -> Callable[[dict, dict], tuple[int, bool]]:
    def validate(qr: dict, sb: dict) -> tuple[int, bool]:
        if not qr.get("success"):
            return 0, False
        data = qr.get("data", {})
        score = weights[0] + (weights[1] if all(f in data for f in fields) else 0)
        try:
            d = _pct(_int(data.get(key, "0")), sb[state])
            score += weights[2] if d <= within else max(0, int(weights[2] * (1 - d / slope)))
        except (ValueError, TypeError):
            pass
        return score, score >= 60

    return validate


def _ref_q_exact(
    field_: str, state: str, compare: Callable[[Any, Any], bool]
) -> Callable[[dict, dict], tuple[int, bool]]:
    def validate(qr: dict, sb: dict) -> tuple[int, bool]:
        if not qr.get("success"):
            return 0, False
        data = qr.get("data", {})
        score = 40 + (30 if field_ in data else 0)
        try:
            score += 30 if compare(data.get(field_, ""), sb[state]) else 0
        except (ValueError, TypeError, AttributeError):
            pass
        return score, score >= 60

    return validate


def ref_q_metadata(qr: dict, sb: dict) -> tuple[int, bool]:
    if not qr.get("success"):
        return 0, False
    data = qr.get("data", {})
    score = 25 + (25 if all(f in data for f in ("name", "symbol", "decimals", "totalSupply")) else 0)
    score += 15 if data.get("name", "") == sb["token_name"] else 0
    score += 15 if data.get("symbol", "") == sb["token_symbol"] else 0
    try:
        score += 20 if int(data.get("decimals", 0)) == sb["token_decimals"] else 0
    except (ValueError, TypeError):
        pass
    return score, score >= 60


def ref_q_block(qr: dict, sb: dict) -> tuple[int, bool]:
    if not qr.get("success"):
        return 0, False
    data = qr.get("data", {})
    score = 50 + (25 if "block_number" in data else 0)
    try:
        got = _int(data.get("block_number", 0))
        ref = sb["reference_block_number"]
        if got > 0 and not (ref > 0 and abs(got - ref) > 100):
            score += 25
    except (ValueError, TypeError):
        pass
    return score, score >= 60


def ref_q_gas(qr: dict, sb: dict) -> tuple[int, bool]:
    if not qr.get("success"):
        return 0, False
    data = qr.get("data", {})
    score = 40 + (30 if "maxFeePerGas" in data and "maxPriorityFeePerGas" in data else 0)
    try:
        fee, tip = _int(data.get("maxFeePerGas", "0")), _int(data.get("maxPriorityFeePerGas", "0"))
        score += 30 if fee > 0 and tip >= 0 and fee >= tip else 0
    except (ValueError, TypeError):
        pass
    return score, score >= 60


def ref_q_nonce(qr: dict, sb: dict) -> tuple[int, bool]:
    if not qr.get("success"):
        return 0, False
    data = qr.get("data", {})
    score = 40 + (30 if "nonce" in data else 0)
    try:
        score += 30 if _int(data.get("nonce", -1)) >= 0 else 0
    except (ValueError, TypeError):
        pass
    return score, score >= 60


def ref_q_nft_approval(qr: dict, sb: dict) -> tuple[int, bool]:
    """query_nft_approval_status_validator: executed (30), an approved_address field (30), then the
    returned, expected and actual addresses all equal (40); it passes only on the last check."""
    if not qr.get("success"):
        return 0, False
    data = qr.get("data", {})
    if "approved_address" not in data:
        return 30, False
    zero = "0x" + "0" * 40
    got = data.get("approved_address", "").lower()
    actual = sb.get("approved_address", zero).lower()
    expected = sb["expected_approved_address"].lower()
    got, actual, expected = (zero if a == "0x0" else a for a in (got, actual, expected))
    ok = got == expected == actual
    return 60 + (40 if ok else 0), ok


@dataclass
class QCase:
    """A query case: our measured state, the reference's ``state_before``, and the answers given."""

    before: dict[str, Any]
    ref_state: dict[str, Any]
    answers: list[Any]


def q_cases(
    truth: Any, ref_state: dict[str, Any], answers: list[Any], extra: dict[str, Any] | None = None
) -> list[QCase]:
    before = {"truth": truth, **(extra or {})}
    return [QCase(before, ref_state, [] if a is None else [a]) for a in answers]


SUPPLY = 10**24 + 12345
STAKED = 40 * E18
AMOUNTS = [E18, 1_990 * E18 + 17]
AMOUNTS_IN = [2_013 * E18 + 9, 1_000 * E18]
QPORTS: dict[str, tuple[Callable[[dict, dict], tuple[int, bool]], list[QCase]]] = {
    "query_erc20_allowance": (
        ref_q_allowance,
        q_cases(
            7 * E18,
            {"allowance": 7 * E18},
            [None, {"allowance_raw": str(7 * E18)}, {"allowance_raw": hex(7 * E18)}, {"allowance_raw": 1},
             {"allowance": 7 * E18}, {"allowance_raw": "lots"}],
        ),
    ),
    "query_pair_reserves": (
        ref_q_reserves,
        q_cases(
            {},
            {"reserve0": 10**21, "reserve1": 5 * 10**23, "blockTimestampLast": 1_700_000_000},
            [None, {"reserve0": str(10**21), "reserve1": str(5 * 10**23), "blockTimestampLast": "1700000000"},
             {"reserve0": 10**21 + 10**18, "reserve1": 5 * 10**23, "blockTimestampLast": 0},
             {"reserve0": 2 * 10**21, "reserve1": 5 * 10**23, "blockTimestampLast": 1_700_000_000},
             {"reserve0": 10**21, "reserve1": 5 * 10**23}, {"reserve0": "0x10", "reserve1": "1", "blockTimestampLast": "1"}],
            {"ref_reserves": [10**21, 5 * 10**23, 1_700_000_000]},
        ),
    ),
    "query_swap_output_amount": (
        ref_q_swap_out,
        q_cases(
            AMOUNTS[-1],
            {"expected_amounts": AMOUNTS},
            [None, {"amounts": [str(a) for a in AMOUNTS]}, {"amounts": json.dumps(AMOUNTS)},
             {"amounts": [AMOUNTS[0], AMOUNTS[1] * 1005 // 1000]}, {"amounts": [AMOUNTS[0], AMOUNTS[1] * 2]},
             {"amounts": [AMOUNTS[1]]}, {"amount_out": AMOUNTS[1]}],
            {"ref_amounts": AMOUNTS},
        ),
    ),
    "query_swap_input_amount": (
        ref_q_swap_in,
        q_cases(
            AMOUNTS_IN[0],
            {"expected_amounts": AMOUNTS_IN},
            [None, {"amounts": [str(a) for a in AMOUNTS_IN], "amount_in": "1", "amount_out": "1"},
             {"amounts": AMOUNTS_IN}, {"amount_in": AMOUNTS_IN[0], "amount_out": AMOUNTS_IN[1]},
             {"amounts": [AMOUNTS_IN[0] * 103 // 100, AMOUNTS_IN[1] * 104 // 100]}, {"amounts": ["x", "y"]},
             {"amounts": [0, 0], "amount_in": 0, "amount_out": 0}],
            {"ref_amounts": AMOUNTS_IN},
        ),
    ),
    "query_staked_amount": (
        _ref_q_graded(("staked_amount", "deposit_time"), "staked_amount", "staked_amount", (30, 30, 40), 1, 10),
        q_cases(
            STAKED,
            {"staked_amount": STAKED},
            [None, {"staked_amount": str(STAKED), "deposit_time": 0}, {"staked_amount": str(STAKED)},
             {"staked_amount": STAKED * 104 // 100, "deposit_time": 1}, {"staked_amount": STAKED * 2, "deposit_time": 1},
             {"deposit_time": 5}, {"staked_amount": "0x10", "deposit_time": 0}],
        ),
    ),
    "query_pending_rewards": (
        _ref_q_graded(("pending_rewards",), "pending_rewards", "pending_rewards", (30, 30, 40), 5, 20),
        q_cases(
            3 * E18,
            {"pending_rewards": 3 * E18},
            [None, {"pending_rewards": str(3 * E18)}, {"pending_rewards": 3 * E18 * 104 // 100},
             {"pending_rewards": 3 * E18 * 110 // 100}, {"pending_rewards": 0}, {"rewards": 3 * E18}],
        ),
    ),
    "query_token_metadata": (
        ref_q_metadata,
        q_cases(
            {"name": "Lynn USD", "symbol": "USDT", "decimals": 18},
            {"token_name": "Lynn USD", "token_symbol": "USDT", "token_decimals": 18},
            [None, {"name": "Lynn USD", "symbol": "USDT", "decimals": 18, "totalSupply": "1"},
             {"name": "Lynn USD", "symbol": "USDT", "decimals": "18"}, {"name": "x", "symbol": "USDT", "decimals": 18},
             {"symbol": "USDT"}, {"name": "Lynn USD", "symbol": "usdt", "decimals": "eighteen", "totalSupply": 0}],
        ),
    ),
    "query_token_total_supply": (
        _ref_q_graded(("totalSupply",), "totalSupply", "token_total_supply", (40, 30, 30), 0.1, 10),
        q_cases(
            SUPPLY,
            {"token_total_supply": SUPPLY},
            [None, {"totalSupply": str(SUPPLY)}, {"totalSupply": SUPPLY * 1005 // 1000}, {"totalSupply": SUPPLY * 2},
             {"supply": SUPPLY}, {"totalSupply": "1e24"}],
        ),
    ),
    "query_nft_owner": (
        _ref_q_exact("owner", "nft_owner", lambda got, want: got.lower() == want.lower()),
        q_cases(
            RECIPIENT,
            {"nft_owner": RECIPIENT},
            [None, {"owner": RECIPIENT.upper().replace("0X", "0x")}, {"owner": OTHER}, {"holder": RECIPIENT}, {"owner": ""}],
        ),
    ),
    "query_nft_token_uri": (
        _ref_q_exact("tokenURI", "token_uri", lambda got, want: isinstance(got, str) and got != "" and got == want),
        q_cases(
            "ipfs://lynn/7",
            {"token_uri": "ipfs://lynn/7"},
            [None, {"tokenURI": "ipfs://lynn/7"}, {"tokenURI": "ipfs://lynn/8"}, {"uri": "ipfs://lynn/7"}, {"tokenURI": 7}],
        ),
    ),
    "query_nft_approval_status": (
        ref_q_nft_approval,
        q_cases(
            RECIPIENT,
            {"approved_address": RECIPIENT, "expected_approved_address": RECIPIENT},
            [None, {"approved_address": RECIPIENT}, {"approved_address": RECIPIENT.upper().replace("0X", "0x")},
             {"approved_address": OTHER}, {"approved_address": "0x0"}, {"approved": RECIPIENT},
             {"approved_address": RECIPIENT, "extra": 1}],
        ),
    ),
    "query_nft_balance": (
        _ref_q_exact("balance", "nft_balance", lambda got, want: _int(got) == want),
        q_cases(3, {"nft_balance": 3}, [None, {"balance": "3"}, {"balance": 3}, {"balance": 4}, {"count": 3}, {"balance": "three"}]),
    ),
    "query_current_block_number": (
        ref_q_block,
        q_cases(
            500,
            {"reference_block_number": 500},
            [None, {"block_number": 500}, {"block_number": "590"}, {"block_number": 700}, {"block_number": 0},
             {"number": 500}],
        ),
    ),
    "query_gas_price": (
        ref_q_gas,
        q_cases(
            3 * GWEI,
            {},
            [None, {"maxFeePerGas": str(4 * GWEI), "maxPriorityFeePerGas": str(GWEI)},
             {"maxFeePerGas": GWEI, "maxPriorityFeePerGas": 2 * GWEI}, {"gasPrice": 3 * GWEI},
             {"maxFeePerGas": 0, "maxPriorityFeePerGas": 0}, {"maxFeePerGas": "fast", "maxPriorityFeePerGas": 1}],
        ),
    ),
    "query_transaction_count_nonce": (
        ref_q_nonce,
        q_cases(4, {"reference_nonce": 4}, [None, {"nonce": 4}, {"nonce": "900"}, {"nonce": -1}, {"count": 4}]),
    ),
}  # fmt: skip
QCASES = [(t, i, c) for t, (_, cases) in QPORTS.items() for i, c in enumerate(cases)]


@pytest.mark.parametrize(("task_id", "index", "case"), QCASES, ids=[f"{t}-{i}" for t, i, _ in QCASES])
def test_query_port_matches_the_reference(task_id: str, index: int, case: QCase) -> None:
    ref, _ = QPORTS[task_id]
    ctx = Ctx(WORLD, {}, case.before, case.before, [], case.answers)  # type: ignore[arg-type]
    score, success, checks = reference.score_atomic(task_id, ctx)
    query_result = {"success": bool(case.answers), "data": case.answers[-1] if case.answers else None}
    theirs = ref(query_result, case.ref_state)
    assert (score, success) == (float(theirs[0]), theirs[1]), (case.answers, [c.as_dict() for c in checks])


def test_every_query_port_has_cases_that_pass_and_fail() -> None:
    for task_id, (ref, cases) in QPORTS.items():
        results = {
            ref({"success": bool(c.answers), "data": c.answers[-1] if c.answers else None}, c.ref_state)[1]
            for c in cases
        }
        assert results == {True, False}, task_id


# ----------------------------------------------------------------------------- batch 4, restated
def _gate(score_if_ok: Callable[[], list[tuple[int, bool]]], rc: dict) -> tuple[int, bool]:
    if not _ok(rc):
        return 0, False
    parts = score_if_ok()
    return sum(w for w, o in parts if o), all(o for _, o in parts)


def ref_stake_single(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    def parts() -> list[tuple[int, bool]]:
        data = tx.get("data", "")
        amount = int(data[10:], 16) if data.startswith("0x") and len(data) >= 74 else wei(p["amount"])
        dec = sb["token_balance"] - sa["token_balance"]
        inc = sa["staked_amount"] - sb["staked_amount"]
        return [
            (25, True),
            (20, sb.get("allowance", 0) >= amount or sa.get("allowance", 0) >= 0),
            (25, dec > 0 and abs(dec - amount) <= amount * 0.001),
            (30, inc > 0 and abs(inc - dec) <= dec * 0.01),
        ]

    return _gate(parts, rc)


def ref_stake_lp(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    def parts() -> list[tuple[int, bool]]:
        dec = sb["lp_token_balance"] - sa["lp_token_balance"]
        inc = sa["staked_amount"] - sb["staked_amount"]
        return [(25, True), (20, True), (25, dec > 0), (30, inc > 0 and abs(inc - dec) <= dec * 0.01)]

    return _gate(parts, rc)


def ref_unstake(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    def parts() -> list[tuple[int, bool]]:
        data = tx.get("data", "")
        amount = int(data[10:74], 16) if data.startswith("0x") and len(data) >= 74 else 0
        tol = amount * 0.01
        inc = sa["lp_token_balance"] - sb["lp_token_balance"]
        dec = sb["staked_amount"] - sa["staked_amount"]
        return [
            (30, True),
            (40, inc > 0 and abs(inc - amount) <= tol),
            (30, dec > 0 and abs(dec - amount) <= tol),
        ]

    return _gate(parts, rc)


def ref_harvest(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    return _gate(lambda: [(30, True), (70, sa["token_balance"] - sb["token_balance"] > 0)], rc)


def ref_emergency(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    def parts() -> list[tuple[int, bool]]:
        back = sa["lp_token_balance"] - sb["lp_token_balance"]
        reward = sa["token_balance"] - sb["token_balance"]
        return [
            (30, True),
            (40, abs(back - sb["staked_amount"]) <= sb["staked_amount"] * 0.01),
            (20, sa["staked_amount"] == 0),
            (10, abs(reward) < 10**15),
        ]

    return _gate(parts, rc)


def ref_call_params(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    return _gate(
        lambda: [
            (40, True),
            (20, tx["to"].lower() == ADDR["board"]),
            (20, _sel(tx) == "0x368b8772"),
            (20, sa.get("message_value", "") == p["message"]),
        ],
        rc,
    )


def ref_call_value(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    want = wei(p["amount"])
    return _gate(
        lambda: [
            (30, True),
            (20, tx["to"].lower() == ADDR["donation"]),
            (20, _sel(tx) == "0xed88c68e"),
            (15, abs(tx["value"] - want) <= 1),
            (15, abs(sa["target_balance"] - sb["target_balance"] - want) <= 1),
        ],
        rc,
    )


def ref_1363_transfer(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    want = wei(p["amount"])
    return _gate(
        lambda: [
            (30, True),
            (40, sb["token_balance"] - sa["token_balance"] == want),
            (20, sa["target_token_balance"] - sb["target_token_balance"] == want),
            (10, tx["data"][2:10].lower() == "1296ee62"),
        ],
        rc,
    )


def ref_1363_approve(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    return _gate(
        lambda: [
            (30, True),
            (50, sa["allowance"] == wei(p["amount"])),
            (20, tx["data"][2:10].lower() in ("3177029f", "cae9ca51")),
        ],
        rc,
    )


def _ref_1155(with_data: bool) -> Callable[..., tuple[int, bool]]:
    def validate(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
        def parts() -> list[tuple[int, bool]]:
            data = tx["data"][2:]
            w = 15 if with_data else 20
            out = [(30, True), (w, tx["to"].lower() == ADDR["multi"]), (w, data[:8] == "f242432a")]
            if with_data:
                out.append((10, len(data) > 200))
            sent = sb["erc1155_balance"] - sa["erc1155_balance"]
            got = sa["target_erc1155_balance"] - sb["target_erc1155_balance"]
            return [*out, (30, sent == p["amount"] and got == p["amount"])]

        return _gate(parts, rc)

    return validate


ADDR.update({"board": "0x" + "55" * 20, "donation": "0x" + "66" * 20, "multi": "0x" + "77" * 20})
ADDR.update({"staking_pool": "0x" + "88" * 20, "lp_farm": "0x" + "99" * 20, "pay1363": "0x" + "13" * 20})


def pool_case(
    name: str,
    t: TxRecord,
    params: dict,
    stake_token: tuple[int, int],
    staked: tuple[int, int],
    gov: tuple[int, int],
) -> Case:
    """Our pool state (stake token, stake, reward token) and the reference's names for it."""
    b = {"agent_stake_token": stake_token[0], "staked": staked[0], "agent_gov": gov[0]}
    a = {"agent_stake_token": stake_token[1], "staked": staked[1], "agent_gov": gov[1]}
    lp = params.get("pool") == "lp_farm"
    rb = {
        "staked_amount": staked[0],
        "token_balance": gov[0] if lp else stake_token[0],
        "lp_token_balance": stake_token[0],
    }
    ra = {
        "staked_amount": staked[1],
        "token_balance": gov[1] if lp else stake_token[1],
        "lp_token_balance": stake_token[1],
    }
    return Case(name, params, t, b, a, rb, ra)


def stake_single_cases() -> list[Case]:
    amt = wei("12.34")
    p = {"amount": "12.34", "pool": "staking_pool"}
    dep = call("deposit(uint256)", amt)
    return [
        pool_case("correct", tx(ADDR["staking_pool"], dep), p, (90 * E18, 90 * E18 - amt), (0, amt), (0, 0)),
        pool_case("rewards_paid_back", tx(ADDR["staking_pool"], dep), p, (90 * E18, 90 * E18 - amt + E18), (0, amt), (0, 0)),
        pool_case("other_amount_loophole", tx(ADDR["staking_pool"], call("deposit(uint256)", amt * 2)), p,
                  (90 * E18, 90 * E18 - 2 * amt), (0, 2 * amt), (0, 0)),
        pool_case("nothing_staked", tx(ADDR["staking_pool"], dep), p, (90 * E18, 90 * E18 - amt), (0, 0), (0, 0)),
        pool_case("reverted", tx(ADDR["staking_pool"], dep, status=0), p, (90 * E18, 90 * E18), (0, 0), (0, 0)),
    ]  # fmt: skip


def stake_lp_cases() -> list[Case]:
    p = {"percent": 25, "pool": "lp_farm"}
    dep = call("deposit(uint256)", 5 * E18)
    return [
        pool_case("correct", tx(ADDR["lp_farm"], dep), p, (20 * E18, 15 * E18), (E18, 6 * E18), (0, 3)),
        pool_case(
            "any_amount_loophole", tx(ADDR["lp_farm"], dep), p, (20 * E18, 19 * E18), (E18, 2 * E18), (0, 3)
        ),
        pool_case(
            "stake_mismatch", tx(ADDR["lp_farm"], dep), p, (20 * E18, 15 * E18), (E18, 3 * E18), (0, 3)
        ),
        pool_case(
            "reverted", tx(ADDR["lp_farm"], dep, status=0), p, (20 * E18, 20 * E18), (E18, E18), (0, 0)
        ),
    ]


def unstake_cases() -> list[Case]:
    p = {"percent": 50, "pool": "lp_farm"}
    w = call("withdraw(uint256)", 4 * E18)
    return [
        pool_case("correct", tx(ADDR["lp_farm"], w), p, (E18, 5 * E18), (8 * E18, 4 * E18), (0, 9)),
        pool_case(
            "within_1%", tx(ADDR["lp_farm"], w), p, (E18, 5 * E18 + E18 // 200), (8 * E18, 4 * E18), (0, 9)
        ),
        pool_case("lp_not_back", tx(ADDR["lp_farm"], w), p, (E18, E18), (8 * E18, 4 * E18), (0, 9)),
        pool_case("reverted", tx(ADDR["lp_farm"], w, status=0), p, (E18, E18), (8 * E18, 8 * E18), (0, 0)),
    ]


def harvest_cases() -> list[Case]:
    h = selector("harvest()")
    out = []
    for pool in ("lp_farm", "staking_pool"):
        p = {"pool": pool}
        out += [
            pool_case(
                f"{pool}_paid", tx(ADDR[pool], h), p, (5, 5 if pool == "lp_farm" else 9), (3, 3), (5, 9)
            ),
            pool_case(f"{pool}_nothing", tx(ADDR[pool], h), p, (5, 5), (3, 3), (5, 5)),
            pool_case(f"{pool}_reverted", tx(ADDR[pool], h, status=0), p, (5, 5), (3, 3), (5, 5)),
        ]
    return out


def emergency_cases() -> list[Case]:
    p = {"pool": "lp_farm"}
    e = selector("emergencyWithdraw()")
    return [
        pool_case("correct", tx(ADDR["lp_farm"], e), p, (E18, 7 * E18), (6 * E18, 0), (2 * E18, 2 * E18)),
        pool_case(
            "harvested_instead", tx(ADDR["lp_farm"], e), p, (E18, 7 * E18), (6 * E18, 0), (2 * E18, 3 * E18)
        ),
        pool_case("partial_withdraw", tx(ADDR["lp_farm"], e), p, (E18, 4 * E18), (6 * E18, 3 * E18), (0, 0)),
        pool_case("reverted", tx(ADDR["lp_farm"], e, status=0), p, (E18, E18), (6 * E18, 6 * E18), (0, 0)),
    ]


def call_params_cases() -> list[Case]:
    p = {"message": "gm from Lynn"}
    out = []
    for name, t, stored in [
        ("set_message", tx(ADDR["board"], selector("setMessage(string)") + "00" * 96), "gm from Lynn"),
        (
            "post_message_other_selector",
            tx(ADDR["board"], selector("postMessage(string)") + "00" * 96),
            "gm from Lynn",
        ),
        ("wrong_text", tx(ADDR["board"], selector("setMessage(string)") + "00" * 96), "gm"),
        ("reverted", tx(ADDR["board"], selector("setMessage(string)"), status=0), ""),
    ]:
        out.append(
            Case(
                name,
                p,
                t,
                {"message": ""},
                {"message": stored},
                {"message_value": ""},
                {"message_value": stored},
            )
        )
    return out


def call_value_cases() -> list[Case]:
    amt = wei("0.123")
    d = selector("donate()")
    out = []
    for name, t, credited in [
        ("correct", tx(ADDR["donation"], d, amt), amt),
        ("one_wei_off_passes", tx(ADDR["donation"], d, amt + 1), amt + 1),
        ("two_wei_off", tx(ADDR["donation"], d, amt + 2), amt + 2),
        ("plain_send", tx(ADDR["donation"], "0x", amt), amt),
        ("reverted", tx(ADDR["donation"], d, amt, status=0), 0),
    ]:
        b, a = {"ref_target_native": 10}, {"ref_target_native": 10 + credited}
        out.append(
            Case(
                name, {"amount": "0.123"}, t, b, a, {"target_balance": 10}, {"target_balance": 10 + credited}
            )
        )
    return out


def t1363_cases() -> list[Case]:
    amt = wei("7.5")
    good = call("transferAndCall(address,uint256)", ADDR["lp_farm"], amt)
    out = []
    for name, t, sent, got in [
        ("correct", tx(ADDR["pay1363"], good), amt, amt),
        ("plain_transfer_passes_at_90_but_fails", tx(ADDR["pay1363"], "0xa9059cbb" + good[10:]), amt, amt),
        ("short", tx(ADDR["pay1363"], good), amt - 1, amt - 1),
        ("reverted", tx(ADDR["pay1363"], good, status=0), 0, 0),
    ]:
        b = {"agent_token": 50 * E18, "ref_receiver_token": 0}
        a = {"agent_token": 50 * E18 - sent, "ref_receiver_token": got}
        rb = {"token_balance": 50 * E18, "target_token_balance": 0}
        ra = {"token_balance": 50 * E18 - sent, "target_token_balance": got}
        out.append(Case(name, {"amount": "7.5"}, t, b, a, rb, ra))
    return out


def a1363_cases() -> list[Case]:
    amt = wei("7.5")
    out = []
    for name, sig, allowance in [
        ("two_params", "approveAndCall(address,uint256)", amt),
        ("three_params", "approveAndCall(address,uint256,bytes)", amt),
        ("plain_approve", "approve(address,uint256)", amt),
        ("wrong_allowance", "approveAndCall(address,uint256)", amt + 1),
    ]:
        t = tx(ADDR["pay1363"], call(sig, ADDR["lp_farm"], amt))
        out.append(
            Case(
                name,
                {"amount": "7.5"},
                t,
                {"allowance": 0},
                {"allowance": allowance},
                {"allowance": 0},
                {"allowance": allowance},
            )
        )
    out.append(Case("reverted", {"amount": "7.5"}, tx(ADDR["pay1363"], "0x3177029f", status=0), {"allowance": 0},
                    {"allowance": 0}, {"allowance": 0}, {"allowance": 0}))  # fmt: skip
    return out


def erc1155_cases(with_data: bool) -> list[Case]:
    sig = "safeTransferFrom(address,address,uint256,uint256,bytes)"
    full = call(sig, OTHER, RECIPIENT, 2, 3, 160) + word(0)
    out = []
    for name, t, moved in [
        ("correct", tx(ADDR["multi"], full), 3),
        ("short_calldata", tx(ADDR["multi"], full[:200]), 3),
        ("wrong_amount", tx(ADDR["multi"], full), 2),
        ("wrong_contract", tx(ADDR["nft"], full), 3),
        ("reverted", tx(ADDR["multi"], full, status=0), 0),
    ]:
        b, a = {"agent_items": 9, "recipient_items": 0}, {"agent_items": 9 - moved, "recipient_items": moved}
        rb = {"erc1155_balance": 9, "target_erc1155_balance": 0}
        ra = {"erc1155_balance": 9 - moved, "target_erc1155_balance": moved}
        out.append(Case(name, {"amount": 3, "item_id": 2, "recipient": RECIPIENT}, t, b, a, rb, ra))
    return out


PORTS.update(
    {
        "stake_single_token": (ref_stake_single, stake_single_cases),
        "stake_lp_tokens": (ref_stake_lp, stake_lp_cases),
        "unstake_lp_tokens": (ref_unstake, unstake_cases),
        "harvest_rewards": (ref_harvest, harvest_cases),
        "emergency_withdraw": (ref_emergency, emergency_cases),
        "contract_call_with_params": (ref_call_params, call_params_cases),
        "contract_call_with_value": (ref_call_value, call_value_cases),
        "erc20_transfer_with_callback_1363": (ref_1363_transfer, t1363_cases),
        "erc20_approve_and_call_1363": (ref_1363_approve, a1363_cases),
        "erc1155_transfer_single": (_ref_1155(False), lambda: erc1155_cases(False)),
        "erc1155_safe_transfer_with_data": (_ref_1155(True), lambda: erc1155_cases(True)),
    }
)
CASES4 = [(task_id, c) for task_id in list(PORTS)[-11:] for c in PORTS[task_id][1]()]


@pytest.mark.parametrize(("task_id", "case"), CASES4, ids=[f"{t}-{c.name}" for t, c in CASES4])
def test_batch4_port_matches_the_reference(task_id: str, case: Case) -> None:
    test_port_matches_the_reference(task_id, case)


# ----------------------------------------------------------------------------- batch 5, restated
def ref_swap_bnb_in(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    return _gate(
        lambda: [
            (30, True),
            (15, tx["to"].lower() == ADDR["router"]),
            (15, _sel(tx) == "0x7ff36ab5"),
            (15, tx["value"] == wei(p["amount"])),
            (25, sa["token_balance"] - sb["token_balance"] > 0),
        ],
        rc,
    )


def _approved_enough(sb: dict, sa: dict, amount: int) -> bool:
    return (
        sb["allowance"] >= amount
        or sa["allowance"] >= amount
        or sb["allowance"] - sa["allowance"] >= amount * 0.99
    )


def ref_swap_to_bnb(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    amount = wei(p["amount"])
    return _gate(
        lambda: [
            (30, True),
            (20, _approved_enough(sb, sa, amount)),
            (10, tx["to"].lower() == ADDR["router"]),
            (10, _sel(tx) == "0x18cbafe5"),
            (20, abs(sb["token_balance"] - sa["token_balance"] - amount) < 10),
            (10, sa["balance"] - sb["balance"] + _fee(rc) > 0),
        ],
        rc,
    )


def ref_swap_tokens(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    amount = wei(p["amount"])
    return _gate(
        lambda: [
            (30, True),
            (15, _approved_enough(sb, sa, amount)),
            (10, tx["to"].lower() == ADDR["router"]),
            (10, _sel(tx) == "0x38ed1739"),
            (20, abs(sb["token_balance"] - sa["token_balance"] - amount) < 10),
            (15, sa["target_token_balance"] - sb["target_token_balance"] > 0),
        ],
        rc,
    )


def ref_multihop(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    if not _ok(rc):
        return 0, False
    score = 20 + (10 if sb["allowance"] > 0 or sa["allowance"] > 0 else 0)
    score += 10 if tx["to"].lower() == ADDR["router"] else 0
    score += 10 if tx["data"][:10] == "0x38ed1739" else 0
    score += 20 if sb["token_balance"] - sa["token_balance"] == wei(p["amount"]) else 0
    score += 20 if sa["target_token_balance"] - sb["target_token_balance"] > 0 else 0
    ends = {ADDR[p["path"][0]], ADDR[p["path"][-1]]}
    pairs = {log["address"].lower() for log in rc.get("logs", []) if log["address"].lower() not in ends}
    score += 10 if len(tx["data"]) > 10 and len(pairs) >= 2 else 0
    return score, score >= 80


def ref_exact_out(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    return _gate(
        lambda: [
            (30, True),
            (15, sb["allowance"] > 0 or sa["allowance"] > 0),
            (10, tx["to"].lower() == ADDR["router"]),
            (10, _sel(tx) == "0x8803dbee"),
            (25, abs(sa["target_token_balance"] - sb["target_token_balance"] - wei(p["amount"])) <= 10),
            (10, sb["token_balance"] - sa["token_balance"] > 0),
        ],
        rc,
    )


def ref_add_bnb(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    if not _ok(rc):
        return 0, False
    amount = wei(p["amount"])
    score = 20 + (15 if sb["allowance"] > 0 or sa["allowance"] > 0 else 0)
    score += 10 if tx["to"].lower() == ADDR["router"] else 0
    score += 10 if tx["data"][:10] == "0xf305d719" else 0
    score += 20 if abs(tx["value"] - amount) <= int(amount * Decimal("0.01")) else 0
    score += 15 if sb["token_balance"] - sa["token_balance"] > 0 else 0
    score += 10 if sa["lp_token_balance"] - sb["lp_token_balance"] > 0 else 0
    return score, score >= 70


def ref_add_tokens(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
    amount = wei(p["amount"])
    lo, hi = int(amount * 0.5), int(amount * 1.5)
    score = 30 if _ok(rc) else 0
    score += 10 if sb["allowance"] > 0 else 0
    score += 10 if sb["token_b_allowance"] > 0 else 0
    score += 10 if tx["to"].lower() == ADDR["router"] else 0
    score += 5 if len(tx["data"]) >= 10 and tx["data"][:10].lower() == "0xe8e33700" else 0
    score += 15 if lo <= sb["token_balance"] - sa["token_balance"] <= hi else 0
    score += 15 if lo <= sb["token_b_balance"] - sa["token_b_balance"] <= hi else 0
    score += 5 if sa["lp_token_balance"] - sb["lp_token_balance"] > 0 else 0
    return score, score >= 70


def _ref_remove(eth: bool) -> Callable[..., tuple[int, bool]]:
    def validate(tx: dict, rc: dict, sb: dict, sa: dict, p: dict) -> tuple[int, bool]:
        if not _ok(rc):
            return 0, False
        burned = sb["lp_token_balance"] - sa["lp_token_balance"]
        if eth:
            share = Decimal(str(sb["lp_token_balance"])) * p["percent"] / Decimal("100")
            lp_ok = int(share * Decimal("0.99")) <= burned <= int(share * Decimal("1.01"))
            last = sa["balance"] - sb["balance"] + _fee(rc) > 0
        else:
            lp_ok = burned > 0
            last = sa["target_token_balance"] - sb["target_token_balance"] > 0
        oks = [
            True,
            sb["lp_allowance"] > 0 or sa["lp_allowance"] > 0,
            tx["to"].lower() == ADDR["router"],
            tx["data"][:10] == ("0x02751cec" if eth else "0xbaa2abde"),
            lp_ok,
            sa["token_balance"] - sb["token_balance"] > 0,
            last,
        ]
        return int(sum(oks) / len(oks) * 100), all(oks)

    return validate


ADDR.update(
    {
        "router": "0x" + "5a" * 20,
        "pair_wrapped_stable": "0x" + "5b" * 20,
        "pair_stable_stable2": "0x" + "5c" * 20,
    }
)


def mapped(name: str, params: dict, t: TxRecord, keys: dict[str, str], before: dict, after: dict) -> Case:
    """A case in our keys, with the reference's snapshot named by ``keys`` (ours -> theirs)."""
    return Case(
        name,
        params,
        t,
        before,
        after,
        {keys[k]: v for k, v in before.items()},
        {keys[k]: v for k, v in after.items()},
    )


def sig_call(task_id: str, words: int = 6) -> str:
    return selector(reference.ROUTER_SIGS[task_id]) + "00" * 32 * words


def swap_bnb_cases() -> list[Case]:
    amt = wei("0.05")
    p = {"amount": "0.05", "path": ["wrapped", "stable"]}
    keys = {"agent_native": "balance", "agent_stable": "token_balance"}
    good = tx(ADDR["router"], sig_call("swap_exact_bnb_for_tokens"), amt, gas_used=120_000)
    out = []
    for name, t, got in [
        ("correct", good, 100 * E18),
        ("value_1_wei_off", tx(ADDR["router"], good.data, amt + 1, gas_used=120_000), 100 * E18),
        ("nothing_received", good, 0),
        ("supporting_fee_variant", tx(ADDR["router"], selector("swapExactETHForTokensSupportingFeeOnTransferTokens(uint256,address[],address,uint256)") + good.data[10:], amt), 5),
        ("reverted", tx(ADDR["router"], good.data, amt, status=0), 0),
    ]:  # fmt: skip
        out.append(mapped(name, p, t, keys, {"agent_native": 9 * E18, "agent_stable": 0},
                          {"agent_native": 9 * E18 - t.value - t.fee, "agent_stable": got}))  # fmt: skip
    return out


def swap_in_cases(task_id: str, path: list[str]) -> list[Case]:
    amt = wei("25")
    p = {"amount": "25", "path": path}
    tin, tout = (
        f"agent_{path[0]}",
        ("agent_native" if task_id == "swap_exact_tokens_for_bnb" else f"agent_{path[-1]}"),
    )
    keys = {tin: "token_balance", "ref_allowance": "allowance"}
    keys[tout] = "balance" if tout == "agent_native" else "target_token_balance"
    good = tx(ADDR["router"], sig_call(task_id), gas_used=150_000)
    hop_logs = [{"address": ADDR[r]} for r in path] + [
        {"address": "0x" + "e1" * 20},
        {"address": "0x" + "e2" * 20},
    ]
    one_hop = [{"address": ADDR[path[0]]}, {"address": "0x" + "e1" * 20}, {"address": ADDR[path[-1]]}]
    out = []
    for name, t, spent, got, allowance, logs in [
        ("correct", good, amt, 3 * E18, (2**255, 2**255 - amt), hop_logs),
        ("spent_9_wei_more", good, amt + 9, 3 * E18, (2**255, 2**255), hop_logs),
        ("spent_double", good, 2 * amt, 3 * E18, (2**255, 2**255), hop_logs),
        ("no_allowance_left", good, amt, 3 * E18, (amt // 2, 0), one_hop),
        ("other_selector", tx(ADDR["router"], "0xdeadbeef" + good.data[10:]), amt, 3 * E18, (1, 1), hop_logs),
        ("reverted", tx(ADDR["router"], good.data, status=0), 0, 0, (1, 1), []),
    ]:
        t.logs = logs
        native_after = 9 * E18 - t.fee + (got if tout == "agent_native" else 0)
        b = {tin: 100 * E18, tout: 9 * E18 if tout == "agent_native" else 0, "ref_allowance": allowance[0]}
        a = {
            tin: 100 * E18 - spent,
            tout: native_after if tout == "agent_native" else got,
            "ref_allowance": allowance[1],
        }
        out.append(mapped(name, p, t, keys, b, a))
    return out


def exact_out_cases() -> list[Case]:
    p = {"amount": "40", "path": ["stable", "stable2"], "exact_out": True}
    keys = {
        "agent_stable": "token_balance",
        "agent_stable2": "target_token_balance",
        "ref_allowance": "allowance",
    }
    good = tx(ADDR["router"], sig_call("swap_tokens_for_exact_tokens"))
    out = []
    for name, t, spent, got, allowance in [
        ("correct", good, 41 * E18, wei("40"), (5, 5)),
        ("ten_wei_more", good, 41 * E18, wei("40") + 10, (5, 5)),
        ("eleven_wei_more", good, 41 * E18, wei("40") + 11, (5, 5)),
        ("no_allowance", good, 41 * E18, wei("40"), (0, 0)),
        ("reverted", tx(ADDR["router"], good.data, status=0), 0, 0, (5, 5)),
    ]:
        out.append(mapped(name, p, t, keys, {"agent_stable": 100 * E18, "agent_stable2": 0, "ref_allowance": allowance[0]},
                          {"agent_stable": 100 * E18 - spent, "agent_stable2": got, "ref_allowance": allowance[1]}))  # fmt: skip
    return out


def add_bnb_cases() -> list[Case]:
    amt = wei("0.2")
    p = {"amount": "0.2", "pair": "pair_wrapped_stable"}
    keys = {"agent_native": "balance", "agent_stable": "token_balance", "agent_pair_wrapped_stable": "lp_token_balance",
            "ref_allowance": "allowance"}  # fmt: skip
    good = tx(ADDR["router"], sig_call("add_liquidity_bnb_token"), amt, gas_used=200_000)
    out = []
    for name, t, tok, lp, allowance in [
        ("correct", good, E18, E18 // 3, 5),
        ("value_off_0.5%", tx(ADDR["router"], good.data, amt * 1005 // 1000), E18, 1, 5),
        ("value_off_2%_passes_at_80", tx(ADDR["router"], good.data, amt * 102 // 100), E18, 1, 5),
        ("no_approval_no_lp_fails", tx(ADDR["router"], good.data, amt * 102 // 100), E18, 0, 0),
        ("reverted", tx(ADDR["router"], good.data, amt, status=0), 0, 0, 5),
    ]:
        b = {
            "agent_native": 9 * E18,
            "agent_stable": 50 * E18,
            "agent_pair_wrapped_stable": 0,
            "ref_allowance": allowance,
        }
        a = {"agent_native": 9 * E18 - t.value - t.fee, "agent_stable": 50 * E18 - tok, "agent_pair_wrapped_stable": lp,
             "ref_allowance": allowance}  # fmt: skip
        out.append(mapped(name, p, t, keys, b, a))
    return out


def add_tokens_cases() -> list[Case]:
    amt = wei("30")
    p = {"amount": "30", "pair": "pair_stable_stable2"}
    keys = {"agent_stable": "token_balance", "agent_stable2": "token_b_balance", "agent_pair_stable_stable2": "lp_token_balance",
            "ref_allowance": "allowance", "ref_allowance_b": "token_b_allowance"}  # fmt: skip
    good = tx(ADDR["router"], sig_call("add_liquidity_tokens", 8), gas_used=220_000)
    out = []
    for name, t, a_spent, b_spent, allowances in [
        ("correct", good, amt, amt, (1, 1)),
        ("half_of_b", good, amt, amt // 2, (1, 1)),
        ("a_not_approved_before", good, amt, amt, (0, 1)),
        ("double", good, 2 * amt, 2 * amt, (1, 1)),
        ("reverted_still_scores_35", tx(ADDR["router"], good.data, status=0), 0, 0, (1, 1)),
    ]:
        b = {"agent_stable": 100 * E18, "agent_stable2": 100 * E18, "agent_pair_stable_stable2": 0,
             "ref_allowance": allowances[0], "ref_allowance_b": allowances[1]}  # fmt: skip
        a = {"agent_stable": 100 * E18 - a_spent, "agent_stable2": 100 * E18 - b_spent,
             "agent_pair_stable_stable2": 1 if a_spent else 0, "ref_allowance": 0, "ref_allowance_b": 0}  # fmt: skip
        out.append(mapped(name, p, t, keys, b, a))
    return out


def remove_cases(eth: bool) -> list[Case]:
    task_id = "remove_liquidity_bnb_token" if eth else "remove_liquidity_tokens"
    pair = "pair_wrapped_stable" if eth else "pair_stable_stable2"
    p = {"percent": 50, "pair": pair}
    other = "agent_native" if eth else "agent_stable2"
    keys = {f"agent_{pair}": "lp_token_balance", "agent_stable": "token_balance", "ref_lp_allowance": "lp_allowance",
            other: "balance" if eth else "target_token_balance"}  # fmt: skip
    good = tx(ADDR["router"], sig_call(task_id), gas_used=180_000)
    out = []
    for name, t, burned, back, allowance in [
        ("correct", good, 5 * E18, E18, 2**255),
        ("burned_60%", good, 6 * E18, E18, 2**255),
        ("nothing_back", good, 5 * E18, 0, 2**255),
        ("wrong_function", tx(ADDR["router"], "0x12345678" + good.data[10:]), 5 * E18, E18, 0),
        ("reverted", tx(ADDR["router"], good.data, status=0), 0, 0, 2**255),
    ]:
        other_before = 9 * E18 if eth else 0
        other_after = (other_before - t.fee + back) if eth else back
        b = {f"agent_{pair}": 10 * E18, "agent_stable": 0, "ref_lp_allowance": allowance, other: other_before}
        a = {
            f"agent_{pair}": 10 * E18 - burned,
            "agent_stable": back,
            "ref_lp_allowance": allowance,
            other: other_after,
        }
        out.append(mapped(name, p, t, keys, b, a))
    return out


def _as_reference_with_logs(t: TxRecord) -> tuple[dict, dict]:
    rtx, rc = as_reference(t)
    rc["logs"] = list(t.logs)
    return rtx, rc


BATCH5: dict[str, tuple[Callable[..., tuple[int, bool]], Callable[[], list[Case]]]] = {
    "swap_exact_bnb_for_tokens": (ref_swap_bnb_in, swap_bnb_cases),
    "swap_exact_tokens_for_bnb": (ref_swap_to_bnb, lambda: swap_in_cases("swap_exact_tokens_for_bnb", ["stable", "wrapped"])),
    "swap_exact_tokens_for_tokens": (ref_swap_tokens, lambda: swap_in_cases("swap_exact_tokens_for_tokens", ["stable", "stable2"])),
    "swap_multihop_routing": (ref_multihop, lambda: swap_in_cases("swap_multihop_routing", ["stable2", "stable", "wrapped"])),
    "swap_tokens_for_exact_tokens": (ref_exact_out, exact_out_cases),
    "add_liquidity_bnb_token": (ref_add_bnb, add_bnb_cases),
    "add_liquidity_tokens": (ref_add_tokens, add_tokens_cases),
    "remove_liquidity_bnb_token": (_ref_remove(True), lambda: remove_cases(True)),
    "remove_liquidity_tokens": (_ref_remove(False), lambda: remove_cases(False)),
}  # fmt: skip
CASES5 = [(task_id, c) for task_id, (_, make) in BATCH5.items() for c in make()]


@pytest.mark.parametrize(("task_id", "case"), CASES5, ids=[f"{t}-{c.name}" for t, c in CASES5])
def test_batch5_port_matches_the_reference(task_id: str, case: Case) -> None:
    ref, _ = BATCH5[task_id]
    ctx = Ctx(WORLD, case.params, case.before, case.after, [case.tx], [])  # type: ignore[arg-type]
    score, success, checks = reference.score_atomic(task_id, ctx)
    theirs = ref(*_as_reference_with_logs(case.tx), case.ref_before, case.ref_after, case.params)
    assert (score, success) == (float(theirs[0]), theirs[1]), (case.name, [c.as_dict() for c in checks])


def test_batch5_ports_have_cases_that_pass_and_fail() -> None:
    for task_id, (ref, make) in BATCH5.items():
        results = {
            ref(*_as_reference_with_logs(c.tx), c.ref_before, c.ref_after, c.params)[1] for c in make()
        }
        assert results == {True, False}, task_id


# ----------------------------------------------------------------------------- parameter ranges
def test_reference_profile_draws_the_reference_ranges() -> None:
    from lynn.envs.evmquest.evmquest_env import EVMQuestEnv

    tasks = ["bnb_transfer_percentage", "wbnb_deposit", "emergency_withdraw"]
    ref, ours = EVMQuestEnv(task=tasks, scoring="reference"), EVMQuestEnv(task=tasks)
    try:
        seen: dict[str, set[Any]] = {"ref": set(), "ours": set()}
        for seed in range(12):
            ref.reset(seed=seed, options={"task_id": "bnb_transfer_percentage"})
            ours.reset(seed=seed, options={"task_id": "bnb_transfer_percentage"})
            seen["ref"].add(ref.instance.params["percent"])
            seen["ours"].add(ours.instance.params["percent"])
            ref.reset(seed=seed, options={"task_id": "wbnb_deposit"})
            assert Decimal("0.001") <= Decimal(ref.instance.params["amount"]) <= Decimal("0.05")
            ref.reset(seed=seed, options={"task_id": "emergency_withdraw"})
            assert ref.instance.params["pool"] == "lp_farm"
        assert seen["ref"] <= set(range(10, 95, 5)) and len(seen["ref"]) > 3
        assert seen["ours"] <= {1, 2, 5, 10}
        assert ref.instance.spec.params is not ours.specs["emergency_withdraw"].params  # ours untouched
        assert ours.specs["emergency_withdraw"].params["pool"]["rule"] == "choice"
    finally:
        ref.close()
        ours.close()
