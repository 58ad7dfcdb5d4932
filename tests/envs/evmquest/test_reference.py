"""``scoring="reference"``: EVM-QuestBench's rules, side by side with a re-statement of its validators.

The ``ref_*`` functions restate the public reference's validator behaviour (``Amorth/bsc_quest_bench``,
``validators/*.py``: each takes ``tx``, ``receipt``, ``state_before``, ``state_after`` dicts and returns
``score`` and ``passed``) in the reference's own terms — raw dicts, no env code. Hand-built cases are
scored by them and by our profile (:mod:`lynn.envs.evmquest.reference`) and must agree.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from lynn.agents.evmquest_oracle import EVMQuestOracle
from lynn.envs.evmquest import reference
from lynn.envs.evmquest.evmquest_env import EVMQuestEnv, implemented_specs
from lynn.envs.evmquest.spec import oracle_steps
from lynn.envs.evmquest.taskkit import Ctx, TxRecord, selector, wei

E18 = 10**18
RECIPIENT = "0x" + "ab" * 20
WRAPPED, TOKEN, NFT = "0x" + "11" * 20, "0x" + "22" * 20, "0x" + "33" * 20
WORLD = SimpleNamespace(addresses={"wrapped": WRAPPED, "stable": TOKEN, "nft": NFT})


# ----------------------------------------------------------------------------- the reference, restated
def ref_bnb_transfer(tx: dict, receipt: dict, sb: dict, sa: dict, to: str, amount: int, w: tuple) -> tuple:
    ok = [
        receipt["status"] == 1,
        (tx.get("to") or "").lower() == to.lower(),
        abs(int(tx.get("value", 0)) - amount) <= int(amount * 0.001),
        receipt["gasUsed"] >= 21000 and tx.get("gas", 0) >= receipt["gasUsed"] and tx.get("gas", 0) <= 500000,
    ]
    change = sb["balance"] - sa["balance"]
    expected = int(tx.get("value", 0)) + receipt["gasUsed"] * receipt["effectiveGasPrice"]
    ok.append(abs(change - expected) <= int(expected * 0.001))
    return sum(wi for wi, o in zip(w, ok, strict=True) if o), all(ok)


def ref_erc20_transfer(tx: dict, receipt: dict, sb: dict, sa: dict, token: str, amount: int) -> tuple:
    if receipt["status"] != 1:
        return 0, False
    score = 30
    score += 20 if tx["to"].lower() == token.lower() else 0
    score += 20 if tx["data"][:10].lower() == "0xa9059cbb" else 0
    sender = sa["token_balance"] - sb["token_balance"]
    receiver = sa["target_token_balance"] - sb["target_token_balance"]
    score += 30 if sender == -amount and receiver == amount else 0
    return score, score >= 80


def ref_wbnb_deposit(tx: dict, receipt: dict, sb: dict, sa: dict, wbnb: str, amount: int) -> tuple:
    if receipt["status"] != 1:
        return 0, False
    tol = int(amount * 0.001)
    score = 30 + (20 if tx["to"].lower() == wbnb.lower() else 0)
    score += 20 if tx["data"][:10].lower() == "0xd0e30db0" else 0
    score += 20 if abs(int(tx["value"]) - amount) <= tol else 0
    score += 10 if abs(sa["token_balance"] - sb["token_balance"] - amount) <= tol else 0
    return score, score >= 80


def ref_erc721_transfer(tx: dict, receipt: dict, sb: dict, sa: dict, nft: str, to: str) -> tuple:
    if receipt["status"] != 1:
        return 0, False
    score = 30 + (20 if tx["to"].lower() == nft.lower() else 0)
    score += 20 if tx["data"][:10].lower() == "0x23b872dd" else 0
    score += 30 if sa["nft_owner"].lower() == to.lower() else 0
    return score, score >= 80


def ref_erc721_approve(tx: dict, receipt: dict, sb: dict, sa: dict, spender: str) -> tuple:
    if receipt["status"] != 1:
        return 0, False
    ok = [True, (sa.get("nft_approved") or "").lower() == spender.lower(), tx["data"][:10] == "0x095ea7b3"]
    return sum(w for w, o in zip((30, 50, 20), ok, strict=True) if o), all(ok)


def ref_query_bnb_balance(query_result: dict, sb: dict) -> tuple:
    if not query_result.get("success"):
        return 0, False
    data = query_result.get("data")
    if not isinstance(data, dict) or "balance_wei" not in data:
        return 30, False
    raw = data["balance_wei"]
    try:
        value = int(raw, 16) if isinstance(raw, str) and raw.startswith("0x") else int(raw)
    except (TypeError, ValueError):
        return 60, False
    return (100, True) if value == sb["balance"] else (60, False)


# ----------------------------------------------------------------------------- hand-built cases
def record(
    to: str, data: str, value: int, status: int = 1, gas_used: int = 21000, gas: int = 21000
) -> TxRecord:
    return TxRecord(
        to=to,
        data=data,
        value=value,
        status=status,
        gas_used=gas_used,
        fee=gas_used * 10**9,
        tx_hash="0x",
        gas_limit=gas,
    )


def as_reference(tx: TxRecord) -> tuple[dict, dict]:
    return (
        {"to": tx.to, "data": tx.data, "value": tx.value, "gas": tx.gas_limit},
        {"status": tx.status, "gasUsed": tx.gas_used, "effectiveGasPrice": tx.fee // max(tx.gas_used, 1)},
    )


def native_cases() -> Iterator[tuple[str, TxRecord, int]]:
    """(name, transaction, sender's balance change) around a transfer of 0.25 native."""
    amount = wei("0.25")
    good = record(RECIPIENT, "0x", amount)
    yield "correct", good, amount + good.fee
    yield "within_0.1%", record(RECIPIENT, "0x", amount * 10005 // 10000), amount * 10005 // 10000 + good.fee
    yield "off_2%", record(RECIPIENT, "0x", amount * 102 // 100), amount * 102 // 100 + good.fee
    yield "wrong_recipient", record(WRAPPED, "0x", amount), amount + good.fee
    yield "reverted", record(RECIPIENT, "0x", amount, status=0), good.fee
    yield "gas_limit_too_high", record(RECIPIENT, "0x", amount, gas=600_000), amount + good.fee
    yield "balance_mismatch", good, amount


@pytest.mark.parametrize("name", [c[0] for c in native_cases()])
@pytest.mark.parametrize(
    ("task_id", "weights"),
    [("bnb_transfer_basic", (30, 25, 25, 10, 10)), ("bnb_transfer_percentage", (30, 20, 30, 10, 10))],
)
def test_native_transfers_match_the_reference(task_id: str, weights: tuple, name: str) -> None:
    _, tx, spent = next(c for c in native_cases() if c[0] == name)
    balance = 5 * E18
    before, after = {"agent_native": balance}, {"agent_native": balance - spent}
    params: dict[str, Any] = {"recipient": RECIPIENT, "amount": "0.25", "percent": 5}
    want = wei("0.25") if task_id == "bnb_transfer_basic" else balance * 5 // 100
    if task_id == "bnb_transfer_percentage":  # 5% of 5 = 0.25: the same cases apply
        assert want == wei("0.25")
    ours = reference.score_atomic(task_id, Ctx(WORLD, params, before, after, [tx], []))
    rtx, receipt = as_reference(tx)
    theirs = ref_bnb_transfer(
        rtx, receipt, {"balance": balance}, {"balance": balance - spent}, RECIPIENT, want, weights
    )
    assert (ours[0], ours[1]) == (theirs[0], theirs[1]), (name, ours[2])


TRANSFER = selector("transfer(address,uint256)")


def erc20_cases() -> Iterator[tuple[str, TxRecord, int, int]]:
    amount = wei("12.5")
    data = TRANSFER + RECIPIENT[2:].rjust(64, "0") + hex(amount)[2:].rjust(64, "0")
    yield "correct", record(TOKEN, data, 0, gas_used=50_000, gas=100_000), -amount, amount
    yield "other_selector", record(TOKEN, "0x12345678" + data[10:], 0, gas_used=50_000), -amount, amount
    yield "wrong_recipient", record(TOKEN, data, 0, gas_used=50_000), -amount, 0
    yield "wrong_amount", record(TOKEN, data, 0, gas_used=50_000), -amount - 1, amount + 1
    yield "reverted", record(TOKEN, data, 0, status=0, gas_used=50_000), 0, 0
    yield "wrong_contract", record(WRAPPED, data, 0, gas_used=50_000), -amount, amount


@pytest.mark.parametrize("name", [c[0] for c in erc20_cases()])
def test_erc20_transfer_matches_the_reference(name: str) -> None:
    _, tx, sender, receiver = next(c for c in erc20_cases() if c[0] == name)
    before = {"agent_token": 100 * E18, "recipient_token": 0}
    after = {"agent_token": 100 * E18 + sender, "recipient_token": receiver}
    params = {"recipient": RECIPIENT, "amount": "12.5", "token": "stable"}
    ours = reference.score_atomic("erc20_transfer_fixed", Ctx(WORLD, params, before, after, [tx], []))
    rtx, receipt = as_reference(tx)
    theirs = ref_erc20_transfer(
        rtx,
        receipt,
        {"token_balance": before["agent_token"], "target_token_balance": 0},
        {"token_balance": after["agent_token"], "target_token_balance": receiver},
        TOKEN,
        wei("12.5"),
    )
    assert (ours[0], ours[1]) == theirs, (name, ours[2])


@pytest.mark.parametrize(
    ("name", "value", "to", "data", "minted", "status"),
    [
        ("correct", wei("0.03"), WRAPPED, "0xd0e30db0", wei("0.03"), 1),
        ("value_within_0.1%", wei("0.03") + wei("0.03") // 2000, WRAPPED, "0xd0e30db0", wei("0.03"), 1),
        ("value_off_2%", wei("0.03") * 102 // 100, WRAPPED, "0xd0e30db0", wei("0.03") * 102 // 100, 1),
        ("plain_send_to_fallback", wei("0.03"), WRAPPED, "0x", wei("0.03"), 1),
        ("reverted", wei("0.03"), WRAPPED, "0xd0e30db0", 0, 0),
    ],
)
def test_wbnb_deposit_matches_the_reference(
    name: str, value: int, to: str, data: str, minted: int, status: int
) -> None:
    tx = record(to, data, value, status=status, gas_used=30_000, gas=100_000)
    before, after = (
        {"agent_wrapped": E18, "agent_native": 9 * E18},
        {"agent_wrapped": E18 + minted, "agent_native": 0},
    )
    ours = reference.score_atomic("wbnb_deposit", Ctx(WORLD, {"amount": "0.03"}, before, after, [tx], []))
    rtx, receipt = as_reference(tx)
    theirs = ref_wbnb_deposit(
        rtx, receipt, {"token_balance": E18}, {"token_balance": E18 + minted}, WRAPPED, wei("0.03")
    )
    assert (ours[0], ours[1]) == theirs, (name, ours[2])


@pytest.mark.parametrize(
    ("name", "data", "owner_after"),
    [
        ("transfer_from", selector("transferFrom(address,address,uint256)"), RECIPIENT),
        ("safe_transfer_passes_at_80", selector("safeTransferFrom(address,address,uint256)"), RECIPIENT),
        ("wrong_owner", selector("transferFrom(address,address,uint256)"), "0x" + "cd" * 20),
    ],
)
def test_erc721_transfer_matches_the_reference(name: str, data: str, owner_after: str) -> None:
    tx = record(NFT, data + "00" * 96, 0, gas_used=60_000, gas=200_000)
    ctx = Ctx(
        WORLD, {"recipient": RECIPIENT, "token_id": 3}, {"owner": "0x0"}, {"owner": owner_after}, [tx], []
    )
    ours = reference.score_atomic("erc721_transfer", ctx)
    rtx, receipt = as_reference(tx)
    theirs = ref_erc721_transfer(
        rtx, receipt, {"nft_owner": "0x0"}, {"nft_owner": owner_after}, NFT, RECIPIENT
    )
    assert (ours[0], ours[1]) == theirs, (name, ours[2])


@pytest.mark.parametrize(
    ("name", "data", "approved_after", "status"),
    [
        ("correct", selector("approve(address,uint256)"), RECIPIENT, 1),
        ("set_approval_for_all_instead", selector("setApprovalForAll(address,bool)"), "0x" + "00" * 20, 1),
        ("reverted", selector("approve(address,uint256)"), "0x" + "00" * 20, 0),
    ],
)
def test_erc721_approve_matches_the_reference(name: str, data: str, approved_after: str, status: int) -> None:
    tx = record(NFT, data + "00" * 64, 0, status=status, gas_used=50_000, gas=100_000)
    ctx = Ctx(
        WORLD,
        {"spender": RECIPIENT, "token_id": 2},
        {"approved": None},
        {"approved": approved_after},
        [tx],
        [],
    )
    ours = reference.score_atomic("erc721_approve", ctx)
    rtx, receipt = as_reference(tx)
    theirs = ref_erc721_approve(rtx, receipt, {}, {"nft_approved": approved_after}, RECIPIENT)
    assert (ours[0], ours[1]) == theirs, (name, ours[2])


@pytest.mark.parametrize(
    "answer",
    [
        None,
        {"balance_wei": str(7 * E18)},
        {"balance_wei": hex(7 * E18)},
        {"balance_wei": 7 * E18 + 1},
        {"balance": 7 * E18},
        {"balance_wei": "seven"},
    ],
)
def test_balance_query_matches_the_reference(answer: Any) -> None:
    ctx = Ctx(WORLD, {}, {"truth": 7 * E18}, {"truth": 7 * E18}, [], [] if answer is None else [answer])
    ours = reference.score_atomic("query_bnb_balance", ctx)
    theirs = ref_query_bnb_balance({"success": answer is not None, "data": answer}, {"balance": 7 * E18})
    assert (ours[0], ours[1]) == theirs, (answer, ours[2])


def test_composite_rules_follow_the_controller() -> None:
    ctx = Ctx(WORLD, {}, {}, {}, [record(TOKEN, "0x", 0, status=0)], [])
    # Any transaction sent gives base 100, even a reverted one; decay only beyond the optimum.
    assert reference.score_composite("composite_wrap_unwrap_cycle", ctx, 3)[:2] == (100.0, True)
    assert reference.score_composite("composite_wrap_unwrap_cycle", ctx, 5)[0] == pytest.approx(60.0)
    assert reference.score_composite("composite_wrap_unwrap_cycle", ctx, 6)[:2] == (50.0, False)
    assert reference.composite_steps("composite_nft_bundle_sale") == (5, 10)
    assert reference.composite_steps("composite_wrap_unwrap_cycle") == (3, 6)
    # All-query composites count successful rounds (or one batched answer), not their values.
    one = Ctx(WORLD, {}, {}, {}, [], [{"x": 1}])
    assert reference.score_composite("composite_batch_query_portfolio", one, 1)[0] == pytest.approx(100 / 3)
    batched = Ctx(WORLD, {}, {}, {}, [], [{"balances": {"a": 0, "b": 0, "c": 0}}])
    assert reference.score_composite("composite_batch_query_portfolio", batched, 1)[:2] == (100.0, True)


def ref_pure_query(history: list[dict], expected: int) -> float:
    """composite_validator._validate_pure_query_completion: every round whose action_result has
    success counts (a query, or a transaction sent: its result has success whatever the receipt's
    status), unless one batched result reports at least ``expected`` balances; base score."""
    successful, batched = 0, 0
    for result in history:
        if result.get("success"):
            successful += 1
            balances = result.get("balances") or (result.get("query_result") or {}).get("balances") or {}
            if isinstance(balances, dict) and len(balances) > 1:
                batched = len(balances)
    if batched >= expected:
        successful = batched
    return 100.0 if successful >= expected else 100.0 * successful / expected


def _as_history(answers: list, txs: list[TxRecord]) -> list[dict]:
    sent = [{"success": True, "tx_hash": "0x", "status": t.status} for t in txs]
    return [{"success": True, "is_query": True, "query_result": a, **a} for a in answers] + sent


@pytest.mark.parametrize(
    ("task_id", "answers", "statuses"),
    [
        ("composite_batch_query_2_balances", [], [1, 1]),  # two no-op transactions then done
        ("composite_batch_query_2_balances", [], [0, 1]),  # a reverted one is a round that succeeded
        ("composite_batch_query_2_balances", [{"balance": "1"}], [1]),
        ("composite_batch_query_2_balances", [{"balance": "1"}, {"balance": "2"}], []),
        ("composite_batch_query_2_balances", [{"balance": "1"}], []),
        ("composite_batch_query_2_balances", [], []),
        ("composite_batch_query_portfolio", [], [1, 1, 1]),
        ("composite_batch_query_portfolio", [{"x": 1}], [1]),
        ("composite_batch_query_portfolio", [{"balances": {"a": 0, "b": 0, "c": 0}}], []),
    ],
)
def test_all_query_composites_count_rounds_as_the_reference(
    task_id: str, answers: list, statuses: list
) -> None:
    txs = [record(TOKEN, "0x", 0, status=s) for s in statuses]
    ctx = Ctx(WORLD, {}, {}, {}, txs, answers)
    rounds = max(1, len(answers) + len(txs))
    optimal, _ = reference.composite_steps(task_id)
    decay = 1.0 if rounds <= optimal else optimal / rounds
    base = ref_pure_query(_as_history(answers, txs), reference.PURE_QUERY[task_id])
    score, success, _, got_decay = reference.score_composite(task_id, ctx, rounds)
    assert (score, success, got_decay) == (pytest.approx(base * decay), base * decay >= 60, decay)


# ----------------------------------------------------------------------------- on the chain
@pytest.fixture(scope="module")
def ref_env() -> Iterator[EVMQuestEnv]:
    env = EVMQuestEnv(split="all", scoring="reference")
    yield env
    env.close()


def reverting(wrapped: str) -> str:
    """A script whose transaction reverts: withdraw(2**255) of the wrapped token."""
    data = "0x2e1a7d4d" + (2**255).to_bytes(32, "big").hex()
    return (
        "def execute_skill(w3, agent_address, contracts):\n"
        f"    return {{'to': contracts[{wrapped!r}], 'data': {data!r}, 'value': 0, 'gas': 100000}}\n"
    )


def test_unknown_scoring_is_refused() -> None:
    with pytest.raises(ValueError, match="scoring"):
        EVMQuestEnv(scoring="paper")


@pytest.mark.parametrize("task_id", [s.task_id for s in implemented_specs("all")])
def test_reference_oracle_passes(ref_env: EVMQuestEnv, task_id: str) -> None:
    oracle = EVMQuestOracle(ref_env)
    obs, info = ref_env.reset(seed=3, options={"task_id": task_id})
    assert info["scoring"] == "reference"
    done = False
    while not done:
        obs, reward, terminated, truncated, info = ref_env.step(oracle.act(obs, info))
        done = terminated or truncated
    assert info["success"], (task_id, info.get("error"), info["checks"])
    assert info["reference_port"] is reference.is_ported(task_id, ref_env.instance.spec.split)


def test_reference_attempts_and_split_name(ref_env: EVMQuestEnv) -> None:
    assert ref_env.split_name == "all/reference"
    obs, _ = ref_env.reset(seed=1, options={"task_id": "wbnb_deposit"})
    assert "allows 1 step" in obs["prompt"]
    # One generation, one execution: a reverted transaction ends the episode.
    _, reward, terminated, _, info = ref_env.step(reverting(ref_env.names["wrapped"]))
    assert terminated and reward == 0.0 and not info["success"]


def test_reference_loopholes_are_reproduced(ref_env: EVMQuestEnv) -> None:
    # composite_approve_swap_tokens: the reference pre-sets the allowance, so the swap alone passes.
    ref_env.reset(seed=2, options={"task_id": "composite_approve_swap_tokens"})
    steps = oracle_steps(*ref_env.task_instance)
    for action in [steps[1], json.dumps({"done": True})]:
        _, reward, terminated, _, info = ref_env.step(action)
    assert terminated and info["success"] and reward == 1.0
    # A reverted transaction is "a transaction executed": base score 100.
    ref_env.reset(seed=2, options={"task_id": "composite_wrap_unwrap_cycle"})
    ref_env.step(reverting(ref_env.names["wrapped"]))
    _, reward, terminated, _, info = ref_env.step(json.dumps({"done": True}))
    assert terminated and info["success"] and reward == 1.0


def _reference_snapshots(env: EVMQuestEnv) -> tuple[dict, dict, dict, dict]:
    """The reference controller's view of the last transferFrom: tx, receipt, and the from/to balances
    and from -> agent allowance it reads for the addresses decoded from the calldata, just before and
    after the transaction."""
    from lynn.envs.evmquest.world import AGENT

    w3 = env.world.chain.w3
    t = env.txs[-1]
    receipt = w3.eth.get_transaction_receipt(t.tx_hash)
    owner = w3.to_checksum_address("0x" + t.data[10:74][-40:])
    to = w3.to_checksum_address("0x" + t.data[74:138][-40:])
    view = [{"name": "balanceOf", "inputs": [{"type": "address"}]},
            {"name": "allowance", "inputs": [{"type": "address"}, {"type": "address"}]}]  # fmt: skip
    abi = [
        {**f, "type": "function", "stateMutability": "view", "outputs": [{"type": "uint256"}]} for f in view
    ]
    token = w3.eth.contract(address=env.world.addresses["stable"], abi=abi).functions
    snap = [
        {
            "token_balance": token.balanceOf(owner).call(block_identifier=b),
            "target_token_balance": token.balanceOf(to).call(block_identifier=b),
            "allowance": token.allowance(owner, AGENT.address).call(block_identifier=b),
        }
        for b in (receipt["blockNumber"] - 1, receipt["blockNumber"])
    ]
    return {"to": t.to, "data": t.data}, {"status": t.status}, snap[0], snap[1]


@pytest.mark.parametrize("case", ["instructed", "other_recipient", "other_amount", "other_owner"])
def test_transferfrom_tracks_the_decoded_addresses_as_the_reference(ref_env: EVMQuestEnv, case: str) -> None:
    from eth_utils import to_checksum_address

    from lynn.envs.evmquest.catalog import LOGIC

    from .test_reference_ports import ref_transfer_from

    ref_env.reset(seed=3, options={"task_id": "erc20_transferfrom_basic"})
    params = dict(ref_env.instance.params)
    bad = dict(params)
    if case == "other_recipient":
        bad["recipient"] = to_checksum_address("0x" + "ab" * 20)
    elif case == "other_amount":  # within the allowance: the reference measures the decoded amount
        bad["amount"] = str(float(params["amount"]) / 2)
    elif case == "other_owner":  # no allowance from this one: it reverts
        bad["owner"] = to_checksum_address("0x" + "cd" * 20)
    _, reward, _, _, info = ref_env.step(LOGIC["erc20_transferfrom_basic"].script(bad, ref_env.names))
    theirs = ref_transfer_from(*_reference_snapshots(ref_env), params)
    assert (info["score"], info["success"]) == (float(theirs[0]), theirs[1]), info["checks"]
    assert theirs == {"instructed": (100, True), "other_recipient": (100, True), "other_amount": (100, True),
                      "other_owner": (0, False)}[case]  # fmt: skip


def test_all_query_composite_counts_sent_transactions_as_the_reference(ref_env: EVMQuestEnv) -> None:
    """Two no-op transactions, then done: the reference counts both rounds as completed queries."""
    ref_env.reset(seed=1, options={"task_id": "composite_batch_query_2_balances"})
    noop = "def execute_skill(w3, agent_address, contracts):\n    return {'to': agent_address, 'value': 0}\n"
    for action in [noop, noop, json.dumps({"done": True})]:
        _, reward, terminated, _, info = ref_env.step(action)
    history = [{"success": True, "status": t.status} for t in ref_env.txs]
    assert len(history) == 2 and not ref_env.answers
    base = ref_pure_query(history, reference.PURE_QUERY["composite_batch_query_2_balances"])
    optimal, _ = reference.composite_steps("composite_batch_query_2_balances")
    assert terminated and reward == pytest.approx(base * min(1.0, optimal / 2) / 100) and base == 100.0
