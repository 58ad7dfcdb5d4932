"""The atomic tasks of Lynn/EVMQuest-v0 (``ATOMIC``): one transaction or one answer each.

Each entry is a :class:`~lynn.envs.evmquest.taskkit.TaskLogic` written with the task kit:
its set-up, measured state, oracle script and weighted checks sit together, grouped by task
family (native coin, wrapped native, ERC-20, NFTs, plain contract calls, DEX, staking, queries).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lynn.envs.evmquest.answers import UNIT_INT, AnswerSpec
from lynn.envs.evmquest.taskkit import (
    DEADLINE,
    E18,
    ROUTER_FNS,
    Check,
    Ctx,
    TaskLogic,
    abi_json,
    approve_as_agent,
    bal,
    c_answer,
    c_eq,
    c_gas,
    c_selector,
    c_status,
    c_to,
    c_value,
    native,
    path_expr,
    plain_script,
    query_script,
    s_add_eth,
    selector,
    share,
    swap_path,
    tx_script,
    wei,
)
from lynn.envs.evmquest.world import AGENT, AGENT_NFTS, FRIEND, World

ATOMIC: dict[str, TaskLogic] = {}


def task(task_id: str, **kwargs: Any) -> None:
    ATOMIC[task_id] = TaskLogic(**kwargs)


# --- native coin -------------------------------------------------------------------------------
def _percent_of_native(v: Ctx) -> int:
    """The percentage of the balance at reset, or of the balance left after earlier (reverted) tries."""
    pct = int(v.params["percent"])
    at_reset = v.before["agent_native"] * pct // 100
    at_send = (v.before["agent_native"] - sum(t.fee for t in v.txs[:-1])) * pct // 100
    return at_send if v.tx is not None and v.tx.value == at_send else at_reset


def _native_transfer_checks(v: Ctx, want_value: int, recipient: str) -> list[Check]:
    fee = v.fees
    spent = -v.delta("agent_native")
    return [
        c_status(v, 30),
        c_to(v, recipient, 25, "recipient"),
        c_value(v, want_value, 25),
        c_gas(v, 10, 100_000),
        c_eq("sender_balance_delta", 10, spent, want_value + fee),
    ]


def _m_native(w: World, p: dict[str, Any]) -> dict[str, Any]:
    out = {"agent_native": native(w, AGENT.address)}
    if "recipient" in p:
        out["recipient_native"] = native(w, p["recipient"])
    return out


task(
    "bnb_transfer_basic",
    script=lambda p, n: plain_script(
        f'return {{"to": {p["recipient"]!r}, "value": w3.to_wei({p["amount"]!r}, "ether"), "data": "0x"}}'
    ),
    checks=lambda v: _native_transfer_checks(v, wei(v.params["amount"]), v.params["recipient"]),
    measure=_m_native,
)
task(
    "bnb_transfer_percentage",
    script=lambda p, n: plain_script(
        f"balance = w3.eth.get_balance(agent_address)\n"
        f'return {{"to": {p["recipient"]!r}, "value": {share("balance", p["percent"])}, "data": "0x"}}'
    ),
    checks=lambda v: _native_transfer_checks(v, _percent_of_native(v), v.params["recipient"]),
    measure=_m_native,
)


def _message_checks(v: Ctx) -> list[Check]:
    tx = v.tx
    want = "0x" + v.params["message"].encode().hex()
    return [
        c_status(v, 30),
        c_to(v, v.params["recipient"], 20, "recipient"),
        c_value(v, wei(v.params["amount"]), 20),
        c_eq("message_data", 20, (tx.data if tx else "").lower(), want.lower()),
        c_gas(v, 10, 200_000),
    ]


task(
    "bnb_transfer_with_message",
    script=lambda p, n: plain_script(
        f'return {{"to": {p["recipient"]!r}, "value": w3.to_wei({p["amount"]!r}, "ether"), '
        f'"data": "0x" + {p["message"]!r}.encode("utf-8").hex()}}'
    ),
    checks=_message_checks,
    measure=_m_native,
)


def _m_fallback(w: World, p: dict[str, Any]) -> dict[str, Any]:
    c = w.reader("fallback").functions
    return {
        "agent_native": native(w, AGENT.address),
        "received": c.receivedFrom(AGENT.address).call(),
        "receive_calls": c.receiveCalls().call(),
        "fallback_calls": c.fallbackCalls().call(),
        "last_data": "0x" + bytes(c.lastData().call()).hex(),
    }


task(
    "bnb_transfer_to_contract",
    script=lambda p, n: plain_script(
        f'return {{"to": contracts[{n["fallback"]!r}], "value": w3.to_wei({p["amount"]!r}, "ether"), "data": "0x"}}'
    ),
    checks=lambda v: [
        c_status(v, 30),
        c_to(v, v.addr("fallback"), 25, "recipient_contract"),
        c_value(v, wei(v.params["amount"]), 15),
        c_eq("contract_credited", 20, v.delta("received"), wei(v.params["amount"])),
        c_gas(v, 10, 200_000),
    ],
    measure=_m_fallback,
)
task(
    "contract_payable_fallback",
    script=lambda p, n: plain_script(
        f'return {{"to": contracts[{n["fallback"]!r}], "value": w3.to_wei({p["amount"]!r}, "ether"), "data": {p["calldata"]!r}}}'
    ),
    checks=lambda v: [
        c_status(v, 30),
        c_to(v, v.addr("fallback"), 20, "target"),
        c_value(v, wei(v.params["amount"]), 15),
        c_eq("fallback_ran", 15, v.delta("fallback_calls"), 1),
        c_eq("fallback_data", 10, v.after["last_data"], v.params["calldata"]),
        c_gas(v, 10, 200_000),
    ],
    measure=_m_fallback,
)


def _max_script(p: dict[str, Any], n: dict[str, str]) -> str:
    return plain_script(
        "balance = w3.eth.get_balance(agent_address)\n"
        "fee_cap = 2 * w3.eth.get_block('latest')['baseFeePerGas'] + w3.to_wei(1, 'gwei')\n"
        f'return {{"to": {p["recipient"]!r}, "value": balance - 21000 * fee_cap, "data": "0x", "gas": 21000, '
        '"maxFeePerGas": fee_cap, "maxPriorityFeePerGas": w3.to_wei(1, "gwei")}'
    )


task(
    "bnb_transfer_max_amount",
    script=_max_script,
    checks=lambda v: [
        c_status(v, 30),
        c_to(v, v.params["recipient"], 25, "recipient"),
        c_eq(
            "sent_almost_all", 25, v.delta("recipient_native") >= v.before["agent_native"] * 995 // 1000, True
        ),
        Check(
            "left_only_dust",
            10,
            0 <= v.after["agent_native"] <= wei("0.01"),
            f"left {v.after['agent_native']} wei",
        ),
        c_gas(v, 10, 100_000),
    ],
    measure=_m_native,
)


# --- wrapped native ------------------------------------------------------------------------------
def _m_wrapped(w: World, p: dict[str, Any]) -> dict[str, Any]:
    return {"agent_native": native(w, AGENT.address), "agent_wrapped": bal(w, "wrapped", AGENT.address)}


task(
    "wbnb_deposit",
    script=lambda p, n: tx_script(
        n["wrapped"], "WETH9", ["deposit"], '"deposit"', f'w3.to_wei({p["amount"]!r}, "ether")'
    ),
    checks=lambda v: [
        c_status(v, 30),
        c_to(v, v.addr("wrapped"), 20),
        c_selector(v, ["deposit()"], 10),
        c_value(v, wei(v.params["amount"]), 10),
        c_eq("wrapped_balance_delta", 20, v.delta("agent_wrapped"), wei(v.params["amount"])),
        c_gas(v, 10, 200_000),
    ],
    measure=_m_wrapped,
)
task(
    "wbnb_withdraw",
    script=lambda p, n: tx_script(
        n["wrapped"], "WETH9", ["withdraw"], f'"withdraw", args=[w3.to_wei({p["amount"]!r}, "ether")]'
    ),
    checks=lambda v: [
        c_status(v, 30),
        c_to(v, v.addr("wrapped"), 20),
        c_selector(v, ["withdraw(uint256)"], 10),
        c_eq("wrapped_balance_delta", 30, v.delta("agent_wrapped"), -wei(v.params["amount"])),
        c_gas(v, 10, 200_000),
    ],
    measure=_m_wrapped,
)


# --- ERC-20 ------------------------------------------------------------------------------------
def _m_erc20(w: World, p: dict[str, Any]) -> dict[str, Any]:
    token = p.get("token", "stable")
    out = {
        "agent_token": bal(w, token, AGENT.address),
        "supply": int(w.reader(token).functions.totalSupply().call()),
    }
    if "recipient" in p:
        out["recipient_token"] = bal(w, token, p["recipient"])
    if "spender" in p:
        out["allowance"] = int(w.reader(token).functions.allowance(AGENT.address, p["spender"]).call())
        if token in ("stable", "stable2", "gov"):
            out["nonce"] = int(w.reader(token).functions.nonces(AGENT.address).call())
    return out


def _erc20_transfer_checks(v: Ctx, want: int) -> list[Check]:
    token = v.params.get("token", "stable")
    return [
        c_status(v, 30),
        c_to(v, v.addr(token), 15, "token_contract"),
        c_selector(v, ["transfer(address,uint256)"], 10),
        c_eq("recipient_received", 25, v.delta("recipient_token"), want),
        c_eq("sender_balance_delta", 10, -v.delta("agent_token"), want),
        c_gas(v, 10, 200_000),
    ]


def _transfer_call(p: dict[str, Any], amount_expr: str) -> str:
    return f'"transfer", args=[{p["recipient"]!r}, {amount_expr}]'


task(
    "erc20_transfer_fixed",
    script=lambda p, n: tx_script(
        n[p["token"]], "LynnToken", ["transfer"], _transfer_call(p, f'w3.to_wei({p["amount"]!r}, "ether")')
    ),
    checks=lambda v: _erc20_transfer_checks(v, wei(v.params["amount"])),
    measure=_m_erc20,
)
task(
    "erc20_transfer_percentage",
    script=lambda p, n: tx_script(
        n[p["token"]],
        "LynnToken",
        ["transfer", "balanceOf"],
        _transfer_call(p, share("balance", p["percent"])),
        pre="balance = contract.functions.balanceOf(agent_address).call()",
    ),
    checks=lambda v: _erc20_transfer_checks(v, v.before["agent_token"] * int(v.params["percent"]) // 100),
    measure=_m_erc20,
)
task(
    "erc20_transfer_max_amount",
    script=lambda p, n: tx_script(
        n[p["token"]],
        "LynnToken",
        ["transfer", "balanceOf"],
        _transfer_call(p, "balance"),
        pre="balance = contract.functions.balanceOf(agent_address).call()",
    ),
    checks=lambda v: [
        *_erc20_transfer_checks(v, v.before["agent_token"])[:5],
        c_eq("balance_emptied", 10, v.after["agent_token"], 0),
    ],
    measure=_m_erc20,
)


def _approve_script(p: dict[str, Any], n: dict[str, str], amount_expr: str) -> str:
    return tx_script(
        n[p["token"]],
        "LynnToken",
        ["approve", "allowance"],
        f'"approve", args=[{p["spender"]!r}, {amount_expr}]',
        pre=f"current = contract.functions.allowance(agent_address, {p['spender']!r}).call()",
    )


def _allowance_checks(v: Ctx, want: int, signatures: list[str] | None = None) -> list[Check]:
    token = v.params.get("token", "stable")
    return [
        c_status(v, 30),
        c_to(v, v.addr(token), 15, "token_contract"),
        c_selector(v, signatures or ["approve(address,uint256)"], 10),
        c_eq("allowance", 35, v.after["allowance"], want),
        c_gas(v, 10, 200_000),
    ]


def _setup_allowance(w: World, p: dict[str, Any]) -> None:
    w.call(AGENT, p["token"], "approve", p["spender"], wei(p["initial"]))


task(
    "erc20_approve",
    script=lambda p, n: _approve_script(p, n, f'w3.to_wei({p["amount"]!r}, "ether")'),
    checks=lambda v: _allowance_checks(v, wei(v.params["amount"])),
    measure=_m_erc20,
)
task(
    "erc20_increase_allowance",
    script=lambda p, n: _approve_script(p, n, f'current + w3.to_wei({p["amount"]!r}, "ether")'),
    checks=lambda v: _allowance_checks(
        v,
        wei(v.params["initial"]) + wei(v.params["amount"]),
        ["approve(address,uint256)", "increaseAllowance(address,uint256)"],
    ),
    measure=_m_erc20,
    setup=_setup_allowance,
)
task(
    "erc20_decrease_allowance",
    script=lambda p, n: _approve_script(p, n, f'current - w3.to_wei({p["amount"]!r}, "ether")'),
    checks=lambda v: _allowance_checks(
        v,
        wei(v.params["initial"]) - wei(v.params["amount"]),
        ["approve(address,uint256)", "decreaseAllowance(address,uint256)"],
    ),
    measure=_m_erc20,
    setup=_setup_allowance,
)
task(
    "erc20_revoke_approval",
    script=lambda p, n: _approve_script(p, n, "0"),
    checks=lambda v: [
        *_allowance_checks(v, 0)[:3],
        c_eq("allowance_revoked", 35, v.after["allowance"], 0),
        c_eq("was_nonzero", 0, v.before["allowance"] > 0, True),
        c_gas(v, 10, 200_000),
    ],
    measure=_m_erc20,
    setup=_setup_allowance,
)
task(
    "erc20_burn",
    script=lambda p, n: tx_script(
        n[p["token"]], "LynnToken", ["burn"], f'"burn", args=[w3.to_wei({p["amount"]!r}, "ether")]'
    ),
    checks=lambda v: [
        c_status(v, 30),
        c_to(v, v.addr(v.params["token"]), 15, "token_contract"),
        c_selector(v, ["burn(uint256)"], 10),
        c_eq("supply_delta", 20, v.delta("supply"), -wei(v.params["amount"])),
        c_eq("balance_delta", 15, v.delta("agent_token"), -wei(v.params["amount"])),
        c_gas(v, 10, 200_000),
    ],
    measure=_m_erc20,
)

PERMIT_SCRIPT = """import json

ABI = json.loads({abi!r})


def execute_skill(w3, agent_address, contracts):
    token = w3.eth.contract(address=contracts[{key!r}], abi=ABI)
    value = w3.to_wei({amount!r}, "ether")
    deadline = w3.eth.get_block("latest")["timestamp"] + 3600
    typed = {{
        "types": {{
            "EIP712Domain": [
                {{"name": "name", "type": "string"}},
                {{"name": "version", "type": "string"}},
                {{"name": "chainId", "type": "uint256"}},
                {{"name": "verifyingContract", "type": "address"}},
            ],
            "Permit": [
                {{"name": "owner", "type": "address"}},
                {{"name": "spender", "type": "address"}},
                {{"name": "value", "type": "uint256"}},
                {{"name": "nonce", "type": "uint256"}},
                {{"name": "deadline", "type": "uint256"}},
            ],
        }},
        "primaryType": "Permit",
        "domain": {{
            "name": token.functions.name().call(),
            "version": "1",
            "chainId": w3.eth.chain_id,
            "verifyingContract": token.address,
        }},
        "message": {{
            "owner": agent_address,
            "spender": {spender!r},
            "value": value,
            "nonce": token.functions.nonces(agent_address).call(),
            "deadline": deadline,
        }},
    }}
    signature = w3.provider.make_request("eth_signTypedData_v4", [agent_address, json.dumps(typed)])["result"]
    raw = bytes.fromhex(signature[2:])
    r, s, v = raw[:32], raw[32:64], raw[64]
    data = token.encode_abi("permit", args=[agent_address, {spender!r}, value, deadline, v, r, s])
    return {{"to": token.address, "data": data, "value": 0}}
"""

task(
    "erc20_permit",
    script=lambda p, n: PERMIT_SCRIPT.format(
        abi=abi_json("LynnToken", "permit", "nonces", "name"),
        key=n[p["token"]],
        amount=p["amount"],
        spender=p["spender"],
    ),
    checks=lambda v: [
        c_status(v, 30),
        c_to(v, v.addr(v.params["token"]), 10, "token_contract"),
        c_selector(v, ["permit(address,address,uint256,uint256,uint8,bytes32,bytes32)"], 20),
        c_eq("allowance", 20, v.after["allowance"], wei(v.params["amount"])),
        c_eq("permit_nonce_used", 10, v.delta("nonce"), 1),
        c_gas(v, 10, 300_000),
    ],
    measure=_m_erc20,
)


def _m_transfer_from(w: World, p: dict[str, Any]) -> dict[str, Any]:
    return {
        "friend_token": bal(w, "stable", FRIEND.address),
        "recipient_token": bal(w, "stable", p["recipient"]),
        "allowance": int(w.reader("stable").functions.allowance(FRIEND.address, AGENT.address).call()),
    }


task(
    "erc20_transferfrom_basic",
    script=lambda p, n: tx_script(
        n["stable"],
        "LynnToken",
        ["transferFrom"],
        f'"transferFrom", args=[{p["owner"]!r}, {p["recipient"]!r}, w3.to_wei({p["amount"]!r}, "ether")]',
    ),
    checks=lambda v: [
        c_status(v, 30),
        c_to(v, v.addr("stable"), 10, "token_contract"),
        c_selector(v, ["transferFrom(address,address,uint256)"], 10),
        c_eq("recipient_received", 20, v.delta("recipient_token"), wei(v.params["amount"])),
        c_eq("owner_debited", 10, -v.delta("friend_token"), wei(v.params["amount"])),
        c_eq("allowance_spent", 10, -v.delta("allowance"), wei(v.params["amount"])),
        c_gas(v, 10, 200_000),
    ],
    measure=_m_transfer_from,
)


def _m_1363(w: World, p: dict[str, Any]) -> dict[str, Any]:
    r = w.reader("receiver1363").functions
    return {
        "received": r.received(AGENT.address).call(),
        "approved_by": r.approvedBy(AGENT.address).call(),
        "callbacks": r.callbacks().call(),
        "allowance": int(
            w.reader("pay1363").functions.allowance(AGENT.address, w.addresses["receiver1363"]).call()
        ),
        "agent_token": bal(w, "pay1363", AGENT.address),
    }


task(
    "erc20_transfer_with_callback_1363",
    script=lambda p, n: tx_script(
        n["pay1363"],
        "LynnToken1363",
        ["transferAndCall"],
        f'"transferAndCall", args=[contracts[{n["receiver1363"]!r}], w3.to_wei({p["amount"]!r}, "ether")]',
    ),
    checks=lambda v: [
        c_status(v, 30),
        c_to(v, v.addr("pay1363"), 10, "token_contract"),
        c_selector(v, ["transferAndCall(address,uint256)", "transferAndCall(address,uint256,bytes)"], 10),
        c_eq("receiver_credited", 20, v.delta("received"), wei(v.params["amount"])),
        c_eq("callback_ran", 20, v.delta("callbacks"), 1),
        c_gas(v, 10, 300_000),
    ],
    measure=_m_1363,
)
task(
    "erc20_approve_and_call_1363",
    script=lambda p, n: tx_script(
        n["pay1363"],
        "LynnToken1363",
        ["approveAndCall"],
        f'"approveAndCall", args=[contracts[{n["receiver1363"]!r}], w3.to_wei({p["amount"]!r}, "ether")]',
    ),
    checks=lambda v: [
        c_status(v, 30),
        c_to(v, v.addr("pay1363"), 10, "token_contract"),
        c_selector(v, ["approveAndCall(address,uint256)", "approveAndCall(address,uint256,bytes)"], 10),
        c_eq("allowance", 20, v.after["allowance"], wei(v.params["amount"])),
        c_eq("spender_notified", 20, v.after["approved_by"], wei(v.params["amount"])),
        c_gas(v, 10, 300_000),
    ],
    measure=_m_1363,
)


def _m_flash(w: World, p: dict[str, Any]) -> dict[str, Any]:
    b = w.reader("flash_borrower").functions
    return {
        "loans": b.loans().call(),
        "last_amount": b.lastAmount().call(),
        "initiator": b.lastInitiator().call(),
        "supply": int(w.reader("flash").functions.totalSupply().call()),
    }


task(
    "erc20_flashloan",
    script=lambda p, n: tx_script(
        n["flash"],
        "LynnFlashToken",
        ["flashLoan"],
        f'"flashLoan", args=[contracts[{n["flash_borrower"]!r}], contracts[{n["flash"]!r}], w3.to_wei({p["amount"]!r}, "ether"), b""]',
    ),
    checks=lambda v: [
        c_status(v, 30),
        c_to(v, v.addr("flash"), 10, "lender"),
        c_selector(v, ["flashLoan(address,address,uint256,bytes)"], 10),
        c_eq("loan_taken", 15, v.delta("loans"), 1),
        c_eq("loan_amount", 15, v.after["last_amount"], wei(v.params["amount"])),
        c_eq("initiator", 10, v.after["initiator"], AGENT.address),
        c_eq("repaid", 0, v.delta("supply"), 0),
        c_gas(v, 10, 400_000),
    ],
    measure=_m_flash,
)


# --- NFTs --------------------------------------------------------------------------------------
def _m_nft(w: World, p: dict[str, Any]) -> dict[str, Any]:
    n = w.reader("nft").functions
    tid = int(p.get("token_id", AGENT_NFTS[0]))
    out = {
        "owner": n.ownerOf(tid).call(),
        "approved": n.getApproved(tid).call(),
        "agent_count": n.balanceOf(AGENT.address).call(),
    }
    if "operator" in p:
        out["for_all"] = n.isApprovedForAll(AGENT.address, p["operator"]).call()
    return out


def _nft_transfer_checks(v: Ctx, signatures: list[str]) -> list[Check]:
    return [
        c_status(v, 30),
        c_to(v, v.addr("nft"), 10, "collection"),
        c_selector(v, signatures, 15),
        c_eq("new_owner", 25, v.after["owner"], v.params["recipient"]),
        c_eq("agent_count_delta", 10, v.delta("agent_count"), -1),
        c_gas(v, 10, 300_000),
    ]


task(
    "erc721_transfer",
    script=lambda p, n: tx_script(
        n["nft"],
        "LynnNFT",
        ["transferFrom"],
        f'"transferFrom", args=[agent_address, {p["recipient"]!r}, {int(p["token_id"])}]',
    ),
    checks=lambda v: _nft_transfer_checks(
        v,
        [
            "transferFrom(address,address,uint256)",
            "safeTransferFrom(address,address,uint256)",
            "safeTransferFrom(address,address,uint256,bytes)",
        ],
    ),
    measure=_m_nft,
)
task(
    "erc721_safe_transfer",
    script=lambda p, n: tx_script(
        n["nft"],
        "LynnNFT",
        ["safeTransferFrom"],
        f'"safeTransferFrom", args=[agent_address, {p["recipient"]!r}, {int(p["token_id"])}]',
    ),
    checks=lambda v: _nft_transfer_checks(
        v, ["safeTransferFrom(address,address,uint256)", "safeTransferFrom(address,address,uint256,bytes)"]
    ),
    measure=_m_nft,
)
task(
    "erc721_approve",
    script=lambda p, n: tx_script(
        n["nft"], "LynnNFT", ["approve"], f'"approve", args=[{p["spender"]!r}, {int(p["token_id"])}]'
    ),
    checks=lambda v: [
        c_status(v, 30),
        c_to(v, v.addr("nft"), 15, "collection"),
        c_selector(v, ["approve(address,uint256)"], 10),
        c_eq("approved", 35, v.after["approved"], v.params["spender"]),
        c_gas(v, 10, 200_000),
    ],
    measure=_m_nft,
)
task(
    "erc721_set_approval_for_all",
    script=lambda p, n: tx_script(
        n["nft"], "LynnNFT", ["setApprovalForAll"], f'"setApprovalForAll", args=[{p["operator"]!r}, True]'
    ),
    checks=lambda v: [
        c_status(v, 30),
        c_to(v, v.addr("nft"), 15, "collection"),
        c_selector(v, ["setApprovalForAll(address,bool)"], 10),
        c_eq("operator_approved", 35, v.after["for_all"], True),
        c_gas(v, 10, 200_000),
    ],
    measure=_m_nft,
)


def _m_1155(w: World, p: dict[str, Any]) -> dict[str, Any]:
    m = w.reader("multi").functions
    tid = int(p["item_id"])
    return {
        "agent_items": m.balanceOf(AGENT.address, tid).call(),
        "recipient_items": m.balanceOf(p["recipient"], tid).call(),
    }


def _1155_checks(v: Ctx, with_data: bool) -> list[Check]:
    checks = [
        c_status(v, 30),
        c_to(v, v.addr("multi"), 10, "collection"),
        c_selector(v, ["safeTransferFrom(address,address,uint256,uint256,bytes)"], 10),
        c_eq(
            "recipient_received",
            25 if not with_data else 15,
            v.delta("recipient_items"),
            int(v.params["amount"]),
        ),
        c_eq("agent_debited", 15, -v.delta("agent_items"), int(v.params["amount"])),
        c_gas(v, 10, 300_000),
    ]
    if with_data:
        tx = v.tx
        got = ""
        if tx is not None and tx.selector == selector(
            "safeTransferFrom(address,address,uint256,uint256,bytes)"
        ):
            from eth_abi import decode

            try:
                got = (
                    "0x"
                    + decode(
                        ["address", "address", "uint256", "uint256", "bytes"], bytes.fromhex(tx.data[10:])
                    )[4].hex()
                )
            except Exception:
                got = "undecodable"
        checks.append(c_eq("data_attached", 10, got, "0x" + v.params["memo"].encode().hex()))
    return checks


task(
    "erc1155_transfer_single",
    script=lambda p, n: tx_script(
        n["multi"],
        "LynnMultiToken",
        ["safeTransferFrom"],
        f'"safeTransferFrom", args=[agent_address, {p["recipient"]!r}, {int(p["item_id"])}, {int(p["amount"])}, b""]',
    ),
    checks=lambda v: _1155_checks(v, False),
    measure=_m_1155,
)
task(
    "erc1155_safe_transfer_with_data",
    script=lambda p, n: tx_script(
        n["multi"],
        "LynnMultiToken",
        ["safeTransferFrom"],
        f'"safeTransferFrom", args=[agent_address, {p["recipient"]!r}, {int(p["item_id"])}, {int(p["amount"])}, {p["memo"]!r}.encode("utf-8")]',
    ),
    checks=lambda v: _1155_checks(v, True),
    measure=_m_1155,
)


# --- plain contract calls ----------------------------------------------------------------------
def _m_contracts(w: World, p: dict[str, Any]) -> dict[str, Any]:
    return {
        "count": w.reader("counter").functions.count().call(),
        "donated": w.reader("donation").functions.donations(AGENT.address).call(),
        "message": w.reader("board").functions.messageOf(AGENT.address).call(),
        "caller_value": w.reader("delegate_caller").functions.value().call(),
        "target_value": w.reader("delegate_target").functions.value().call(),
        "caller_sender": w.reader("delegate_caller").functions.lastSender().call(),
    }


task(
    "contract_call_simple",
    script=lambda p, n: tx_script(n["counter"], "Counter", ["increment"], '"increment"'),
    checks=lambda v: [
        c_status(v, 30),
        c_to(v, v.addr("counter"), 20),
        c_selector(v, ["increment()"], 10),
        c_eq("count_delta", 30, v.delta("count"), 1),
        c_gas(v, 10, 200_000),
    ],
    measure=_m_contracts,
)
task(
    "contract_call_with_value",
    script=lambda p, n: tx_script(
        n["donation"], "DonationBox", ["donate"], '"donate"', f'w3.to_wei({p["amount"]!r}, "ether")'
    ),
    checks=lambda v: [
        c_status(v, 30),
        c_to(v, v.addr("donation"), 15),
        c_selector(v, ["donate()"], 10),
        c_value(v, wei(v.params["amount"]), 15),
        c_eq("donation_recorded", 20, v.delta("donated"), wei(v.params["amount"])),
        c_gas(v, 10, 200_000),
    ],
    measure=_m_contracts,
)
task(
    "contract_call_with_params",
    script=lambda p, n: tx_script(
        n["board"], "MessageBoard", ["postMessage"], f'"postMessage", args=[{p["message"]!r}]'
    ),
    checks=lambda v: [
        c_status(v, 30),
        c_to(v, v.addr("board"), 15),
        c_selector(v, ["postMessage(string)", "setMessage(string)"], 15),
        c_eq("message_stored", 30, v.after["message"], v.params["message"]),
        c_gas(v, 10, 300_000),
    ],
    measure=_m_contracts,
)
task(
    "contract_delegate_call",
    script=lambda p, n: tx_script(
        n["delegate_caller"],
        "DelegateCaller",
        ["delegateSetValue"],
        f'"delegateSetValue", args=[contracts[{n["delegate_target"]!r}], {int(p["value"])}]',
    ),
    checks=lambda v: [
        c_status(v, 30),
        c_to(v, v.addr("delegate_caller"), 15),
        c_selector(v, ["delegateSetValue(address,uint256)", "execute(address,bytes)"], 5),
        c_eq("caller_storage_set", 25, v.after["caller_value"], int(v.params["value"])),
        c_eq("target_storage_untouched", 10, v.delta("target_value"), 0),
        c_eq("sender_preserved", 5, v.after["caller_sender"], AGENT.address),
        c_gas(v, 10, 200_000),
    ],
    measure=_m_contracts,
)


# --- DEX: swaps and liquidity ------------------------------------------------------------------
def _m_dex(w: World, p: dict[str, Any]) -> dict[str, Any]:
    out = {"agent_native": native(w, AGENT.address)}
    for role in (
        "wrapped",
        "stable",
        "stable2",
        "gov",
        "pair_wrapped_stable",
        "pair_stable_stable2",
        "pair_wrapped_gov",
    ):
        out[f"agent_{role}"] = bal(w, role, AGENT.address)
    router = w.reader("router").functions
    if "path" in p and "amount" in p:
        path = [w.addresses[r] for r in swap_path(p)]
        out["quote_out"] = int(router.getAmountsOut(wei(p["amount"]), path).call()[-1])
        if p.get("exact_out"):
            out["quote_in"] = int(router.getAmountsIn(wei(p["amount"]), path).call()[0])
    return out


def _approve_router(w: World, p: dict[str, Any]) -> None:
    path = swap_path(p) if "path" in p else []
    for role in {*path, *(p.get("approve", []))}:
        if role != "wrapped" or p.get("approve"):
            approve_as_agent(w, role, "router")


def _swap_checks(v: Ctx, sigs: list[str], out_role: str, in_role: str) -> list[Check]:
    p = v.params
    amount = wei(p["amount"])
    fee = v.fees
    if out_role == "native":
        got_out = v.delta("agent_native") + fee
    else:
        got_out = v.delta(f"agent_{out_role}")
    if in_role == "native":
        spent = -(v.delta("agent_native") + fee)
    else:
        spent = -v.delta(f"agent_{in_role}")
    if p.get("exact_out"):
        amount_checks = [
            c_eq("received_exact", 20, got_out, amount),
            c_eq("spent_quoted", 10, spent, v.before["quote_in"], rel=1e-2),
        ]
    else:
        amount_checks = [
            c_eq("spent_exact", 15, spent, amount),
            c_eq("received_quote", 15, got_out, v.before["quote_out"], rel=2e-2),
        ]
    return [
        c_status(v, 30),
        c_to(v, v.addr("router"), 15, "router"),
        c_selector(v, sigs, 15),
        *amount_checks,
        c_gas(v, 10, 500_000),
    ]


def _swap_script(fn: str, p: dict[str, Any], n: dict[str, str], value_native: bool) -> str:
    amount = f'w3.to_wei({p["amount"]!r}, "ether")'
    path = path_expr(n, swap_path(p))
    if fn == "swapExactETHForTokens":
        call = f'"{fn}", args=[quote * 99 // 100, path, agent_address, deadline]'
    elif fn == "swapTokensForExactTokens":
        call = f'"{fn}", args=[amount, quote * 101 // 100, path, agent_address, deadline]'
    else:
        call = f'"{fn}", args=[amount, quote * 99 // 100, path, agent_address, deadline]'
    quote_fn = "getAmountsIn" if fn == "swapTokensForExactTokens" else "getAmountsOut"
    idx = "0" if quote_fn == "getAmountsIn" else "-1"
    pre = (
        f"amount = {amount}\npath = {path}\ndeadline = {DEADLINE}\n"
        f"quote = contract.functions.{quote_fn}(amount, path).call()[{idx}]"
    )
    return tx_script(
        n["router"], "UniswapV2Router02", ROUTER_FNS, call, "amount" if value_native else "0", pre
    )


task(
    "swap_exact_bnb_for_tokens",
    script=lambda p, n: _swap_script("swapExactETHForTokens", p, n, True),
    checks=lambda v: _swap_checks(
        v,
        [
            "swapExactETHForTokens(uint256,address[],address,uint256)",
            "swapExactETHForTokensSupportingFeeOnTransferTokens(uint256,address[],address,uint256)",
        ],
        swap_path(v.params)[-1],
        "native",
    ),
    measure=_m_dex,
)
task(
    "swap_exact_tokens_for_bnb",
    script=lambda p, n: _swap_script("swapExactTokensForETH", p, n, False),
    checks=lambda v: _swap_checks(
        v,
        [
            "swapExactTokensForETH(uint256,uint256,address[],address,uint256)",
            "swapExactTokensForETHSupportingFeeOnTransferTokens(uint256,uint256,address[],address,uint256)",
        ],
        "native",
        swap_path(v.params)[0],
    ),
    measure=_m_dex,
    setup=_approve_router,
)
for _tid in ("swap_exact_tokens_for_tokens", "swap_multihop_routing"):
    task(
        _tid,
        script=lambda p, n: _swap_script("swapExactTokensForTokens", p, n, False),
        checks=lambda v: [
            *_swap_checks(
                v,
                ["swapExactTokensForTokens(uint256,uint256,address[],address,uint256)"],
                swap_path(v.params)[-1],
                swap_path(v.params)[0],
            ),
            *(
                [c_eq("routed_via_hop", 0, len(swap_path(v.params)), 3)]
                if len(swap_path(v.params)) == 3
                else []
            ),
        ],
        measure=_m_dex,
        setup=_approve_router,
    )
task(
    "swap_tokens_for_exact_tokens",
    script=lambda p, n: _swap_script("swapTokensForExactTokens", p, n, False),
    checks=lambda v: _swap_checks(
        v,
        ["swapTokensForExactTokens(uint256,uint256,address[],address,uint256)"],
        swap_path(v.params)[-1],
        swap_path(v.params)[0],
    ),
    measure=_m_dex,
    setup=_approve_router,
)


def _add_liq_script(p: dict[str, Any], n: dict[str, str]) -> str:
    if p["pair"] == "pair_wrapped_stable":
        return s_add_eth(n, "stable", p["amount"])
    pre = f'amount = w3.to_wei({p["amount"]!r}, "ether")\npath = {path_expr(n, ["stable", "stable2"])}\ndeadline = {DEADLINE}'
    call = '"addLiquidity", args=[path[0], path[1], amount, amount, amount * 98 // 100, amount * 98 // 100, agent_address, deadline]'
    return tx_script(n["router"], "UniswapV2Router02", ROUTER_FNS, call, "0", pre)


def _add_liq_checks(v: Ctx) -> list[Check]:
    p = v.params
    amount = wei(p["amount"])
    if p["pair"] == "pair_wrapped_stable":
        spent = -(v.delta("agent_native") + v.fees)
        sigs = ["addLiquidityETH(address,uint256,uint256,uint256,address,uint256)"]
    else:
        spent = -v.delta("agent_stable")
        sigs = ["addLiquidity(address,address,uint256,uint256,uint256,uint256,address,uint256)"]
    return [
        c_status(v, 30),
        c_to(v, v.addr("router"), 10, "router"),
        c_selector(v, sigs, 10),
        c_eq("lp_minted", 20, v.delta(f"agent_{p['pair']}") > 0, True),
        c_eq("deposited_amount", 20, spent, amount),
        c_gas(v, 10, 600_000),
    ]


task(
    "add_liquidity_bnb_token",
    script=_add_liq_script,
    checks=_add_liq_checks,
    measure=_m_dex,
    setup=lambda w, p: approve_as_agent(w, "stable", "router"),
)
task(
    "add_liquidity_tokens",
    script=_add_liq_script,
    checks=_add_liq_checks,
    measure=_m_dex,
    setup=lambda w, p: [approve_as_agent(w, r, "router") for r in ("stable", "stable2")] and None,
)


def _setup_remove(w: World, p: dict[str, Any]) -> None:
    if p["pair"] == "pair_stable_stable2":
        for role in ("stable", "stable2"):
            approve_as_agent(w, role, "router")
        w.call(
            AGENT,
            "router",
            "addLiquidity",
            w.addresses["stable"],
            w.addresses["stable2"],
            1_000 * E18,
            1_000 * E18,
            0,
            0,
            AGENT.address,
            2**40,
            gas=5_000_000,
        )
    approve_as_agent(w, p["pair"], "router")


def _remove_script(p: dict[str, Any], n: dict[str, str]) -> str:
    pair_key = n[p["pair"]]
    pre = (
        f"pair = w3.eth.contract(address=contracts[{pair_key!r}], abi=PAIR_ABI)\n"
        f"liquidity = {share('pair.functions.balanceOf(agent_address).call()', p['percent'])}\n"
        f"deadline = {DEADLINE}"
    )
    if p["pair"] == "pair_wrapped_stable":
        call = f'"removeLiquidityETH", args=[contracts[{n["stable"]!r}], liquidity, 0, 0, agent_address, deadline]'
    else:
        call = f'"removeLiquidity", args=[contracts[{n["stable"]!r}], contracts[{n["stable2"]!r}], liquidity, 0, 0, agent_address, deadline]'
    src = tx_script(n["router"], "UniswapV2Router02", ROUTER_FNS, call, "0", pre)
    return src.replace(
        "\n\n\ndef execute_skill",
        f"\nPAIR_ABI = json.loads({abi_json('UniswapV2Pair', 'balanceOf')!r})\n\n\ndef execute_skill",
        1,
    )


def _remove_checks(v: Ctx) -> list[Check]:
    p = v.params
    key = f"agent_{p['pair']}"
    want = v.before[key] * int(p["percent"]) // 100
    if p["pair"] == "pair_wrapped_stable":
        sigs = [
            "removeLiquidityETH(address,uint256,uint256,uint256,address,uint256)",
            "removeLiquidityETHSupportingFeeOnTransferTokens(address,uint256,uint256,uint256,address,uint256)",
        ]
        got_back = v.delta("agent_native") + v.fees > 0
    else:
        sigs = ["removeLiquidity(address,address,uint256,uint256,uint256,address,uint256)"]
        got_back = v.delta("agent_stable2") > 0
    return [
        c_status(v, 30),
        c_to(v, v.addr("router"), 10, "router"),
        c_selector(v, sigs, 10),
        c_eq("lp_burned", 25, -v.delta(key), want),
        c_eq("tokens_returned", 15, got_back and v.delta("agent_stable") > 0, True),
        c_gas(v, 10, 600_000),
    ]


task(
    "remove_liquidity_bnb_token",
    script=_remove_script,
    checks=_remove_checks,
    measure=_m_dex,
    setup=_setup_remove,
)
task(
    "remove_liquidity_tokens",
    script=_remove_script,
    checks=_remove_checks,
    measure=_m_dex,
    setup=_setup_remove,
)


# --- staking -----------------------------------------------------------------------------------
def _m_pool(w: World, p: dict[str, Any]) -> dict[str, Any]:
    pool = p.get("pool", "lp_farm")
    f = w.reader(pool).functions
    token = "gov" if pool == "staking_pool" else "pair_wrapped_stable"
    return {
        "staked": f.stakedBalance(AGENT.address).call(),
        "pending": f.pendingReward(AGENT.address).call(),
        "agent_stake_token": bal(w, token, AGENT.address),
        "agent_gov": bal(w, "gov", AGENT.address),
    }


def _pool_call_script(p: dict[str, Any], n: dict[str, str], fn: str, args: str = "") -> str:
    return tx_script(
        n[p["pool"]],
        "RewardPool",
        [fn, "stakedBalance"],
        f'"{fn}"' + (f", args=[{args}]" if args else ""),
        pre="staked = contract.functions.stakedBalance(agent_address).call()",
    )


def _stake_checks(v: Ctx) -> list[Check]:
    want = (
        wei(v.params["amount"])
        if "amount" in v.params
        else v.before["agent_stake_token"] * int(v.params["percent"]) // 100
    )
    return [
        c_status(v, 30),
        c_to(v, v.addr(v.params["pool"]), 15, "pool"),
        c_selector(v, ["deposit(uint256)"], 10),
        c_eq("staked_delta", 35, v.delta("staked"), want),
        c_gas(v, 10, 400_000),
    ]


def _approve_pool(w: World, p: dict[str, Any]) -> None:
    token = "gov" if p["pool"] == "staking_pool" else "pair_wrapped_stable"
    approve_as_agent(w, token, p["pool"])


task(
    "stake_single_token",
    script=lambda p, n: _pool_call_script(p, n, "deposit", f'w3.to_wei({p["amount"]!r}, "ether")'),
    checks=_stake_checks,
    measure=_m_pool,
    setup=_approve_pool,
)


def _stake_lp_script(p: dict[str, Any], n: dict[str, str]) -> str:
    src = _pool_call_script(p, n, "deposit", share("lp", p["percent"]))
    return src.replace(
        "    staked = contract.functions.stakedBalance(agent_address).call()\n",
        f"    lp_token = w3.eth.contract(address=contracts[{n['pair_wrapped_stable']!r}], abi=PAIR_ABI)\n"
        "    lp = lp_token.functions.balanceOf(agent_address).call()\n",
    ).replace(
        "\n\n\ndef execute_skill",
        f"\nPAIR_ABI = json.loads({abi_json('UniswapV2Pair', 'balanceOf')!r})\n\n\ndef execute_skill",
        1,
    )


task("stake_lp_tokens", script=_stake_lp_script, checks=_stake_checks, measure=_m_pool, setup=_approve_pool)
task(
    "unstake_lp_tokens",
    script=lambda p, n: _pool_call_script(p, n, "withdraw", share("staked", p["percent"])),
    checks=lambda v: [
        c_status(v, 30),
        c_to(v, v.addr(v.params["pool"]), 15, "pool"),
        c_selector(v, ["withdraw(uint256)"], 10),
        c_eq("unstaked", 25, -v.delta("staked"), v.before["staked"] * int(v.params["percent"]) // 100),
        c_eq("lp_returned", 10, v.delta("agent_stake_token"), -v.delta("staked")),
        c_gas(v, 10, 400_000),
    ],
    measure=_m_pool,
)
task(
    "harvest_rewards",
    script=lambda p, n: _pool_call_script(p, n, "harvest"),
    checks=lambda v: [
        c_status(v, 30),
        c_to(v, v.addr(v.params["pool"]), 15, "pool"),
        c_selector(v, ["harvest()", "deposit(uint256)", "withdraw(uint256)"], 10),
        c_eq("rewards_paid", 25, v.delta("agent_gov") >= v.before["pending"], True),
        c_eq("stake_kept", 10, v.delta("staked"), 0),
        c_gas(v, 10, 400_000),
    ],
    measure=_m_pool,
)
task(
    "emergency_withdraw",
    script=lambda p, n: _pool_call_script(p, n, "emergencyWithdraw"),
    checks=lambda v: [
        c_status(v, 30),
        c_to(v, v.addr(v.params["pool"]), 15, "pool"),
        c_selector(v, ["emergencyWithdraw()"], 15),
        c_eq("stake_cleared", 20, v.after["staked"], 0),
        c_eq("stake_returned", 10, v.delta("agent_stake_token"), v.before["staked"]),
        c_gas(v, 10, 400_000),
    ],
    measure=_m_pool,
)


# --- queries -----------------------------------------------------------------------------------
def query(
    task_id: str,
    script: Callable[[dict[str, Any], dict[str, str]], str],
    truth: Callable[[World, dict[str, Any]], Any],
    answer: AnswerSpec = AnswerSpec(),
    setup: Callable[[World, dict[str, Any]], None] = lambda w, p: None,
) -> None:
    task(
        task_id,
        script=script,
        checks=lambda v: [c_answer(v, v.after["truth"], 100)],
        measure=lambda w, p: {"truth": truth(w, p)},
        setup=setup,
        answer=answer,
    )


ADDRESS_ANSWER = AnswerSpec("an address: a 0x-prefixed hex string", kind="address")
COUNT_ANSWER = AnswerSpec("an integer count")
query(
    "query_pair_reserves",
    lambda p, n: query_script(
        n[p["pair"]],
        "UniswapV2Pair",
        ["getReserves"],
        '{"reserve0": reserves[0], "reserve1": reserves[1]}',
        pre="reserves = contract.functions.getReserves().call()",
    ),
    lambda w, p: dict(
        zip(("reserve0", "reserve1"), [int(x) for x in w.read(p["pair"], "getReserves")[:2]], strict=True)
    ),
    AnswerSpec(
        fields=(
            ("reserve0", f"the token0 reserve, {UNIT_INT}"),
            ("reserve1", f"the token1 reserve, {UNIT_INT}"),
        )
    ),
)
query(
    "query_swap_output_amount",
    lambda p, n: query_script(
        n["router"],
        "UniswapV2Router02",
        ["getAmountsOut"],
        f'contract.functions.getAmountsOut(w3.to_wei({p["amount"]!r}, "ether"), {path_expr(n, swap_path(p))}).call()[-1]',
    ),
    lambda w, p: int(
        w.reader("router")
        .functions.getAmountsOut(wei(p["amount"]), [w.addresses[r] for r in swap_path(p)])
        .call()[-1]
    ),
)
query(
    "query_swap_input_amount",
    lambda p, n: query_script(
        n["router"],
        "UniswapV2Router02",
        ["getAmountsIn"],
        f'contract.functions.getAmountsIn(w3.to_wei({p["amount"]!r}, "ether"), {path_expr(n, swap_path(p))}).call()[0]',
    ),
    lambda w, p: int(
        w.reader("router")
        .functions.getAmountsIn(wei(p["amount"]), [w.addresses[r] for r in swap_path(p)])
        .call()[0]
    ),
)
query(
    "query_bnb_balance",
    lambda p, n: plain_script(f'return {{"query_result": w3.eth.get_balance({p["account"]!r})}}'),
    lambda w, p: native(w, p["account"]),
)
query(
    "query_erc20_balance",
    lambda p, n: query_script(
        n[p["token"]], "LynnToken", ["balanceOf"], f"contract.functions.balanceOf({p['account']!r}).call()"
    ),
    lambda w, p: bal(w, p["token"], p["account"]),
)
query(
    "query_erc20_allowance",
    lambda p, n: query_script(
        n["stable"],
        "LynnToken",
        ["allowance"],
        f"contract.functions.allowance({p['owner']!r}, agent_address).call()",
    ),
    lambda w, p: int(w.reader("stable").functions.allowance(p["owner"], AGENT.address).call()),
)
query(
    "query_nft_owner",
    lambda p, n: query_script(
        n["nft"], "LynnNFT", ["ownerOf"], f"contract.functions.ownerOf({int(p['token_id'])}).call()"
    ),
    lambda w, p: w.reader("nft").functions.ownerOf(int(p["token_id"])).call(),
    ADDRESS_ANSWER,
)
query(
    "query_nft_balance",
    lambda p, n: query_script(
        n["nft"], "LynnNFT", ["balanceOf"], f"contract.functions.balanceOf({p['account']!r}).call()"
    ),
    lambda w, p: int(w.reader("nft").functions.balanceOf(p["account"]).call()),
    COUNT_ANSWER,
)
query(
    "query_nft_token_uri",
    lambda p, n: query_script(
        n["nft"], "LynnNFT", ["tokenURI"], f"contract.functions.tokenURI({int(p['token_id'])}).call()"
    ),
    lambda w, p: w.reader("nft").functions.tokenURI(int(p["token_id"])).call(),
    AnswerSpec("the token URI: the exact string tokenURI returns", kind="text"),
)
query(
    "query_nft_approval_status",
    lambda p, n: query_script(
        n["nft"], "LynnNFT", ["getApproved"], f"contract.functions.getApproved({int(p['token_id'])}).call()"
    ),
    lambda w, p: w.reader("nft").functions.getApproved(int(p["token_id"])).call(),
    AnswerSpec("an address: the one getApproved(tokenId) returns", kind="address"),
    # The reference's set-up: the agent approves a random address for one of its tokens before the
    # episode; the address is not in the instruction, so only reading the chain answers it.
    setup=lambda w, p: w.call(AGENT, "nft", "approve", p["approved"], int(p["token_id"])),
)
query(
    "query_staked_amount",
    lambda p, n: query_script(
        n[p["pool"]],
        "RewardPool",
        ["stakedBalance"],
        "contract.functions.stakedBalance(agent_address).call()",
    ),
    lambda w, p: int(w.reader(p["pool"]).functions.stakedBalance(AGENT.address).call()),
)
query(
    "query_pending_rewards",
    lambda p, n: query_script(
        n[p["pool"]],
        "RewardPool",
        ["pendingReward"],
        "contract.functions.pendingReward(agent_address).call()",
    ),
    lambda w, p: int(w.reader(p["pool"]).functions.pendingReward(AGENT.address).call()),
)
query(
    "query_token_metadata",
    lambda p, n: query_script(
        n[p["token"]],
        "LynnToken",
        ["name", "symbol", "decimals"],
        '{"name": contract.functions.name().call(), "symbol": contract.functions.symbol().call(), "decimals": contract.functions.decimals().call()}',
    ),
    lambda w, p: {
        k: getattr(w.reader(p["token"]).functions, k)().call() for k in ("name", "symbol", "decimals")
    },
    AnswerSpec(
        fields=(
            ("name", "the token name, exactly as name() returns it"),
            ("symbol", "the symbol, exactly as symbol() returns it"),
            ("decimals", "an integer"),
        )
    ),
)
query(
    "query_token_total_supply",
    lambda p, n: query_script(
        n[p["token"]], "LynnToken", ["totalSupply"], "contract.functions.totalSupply().call()"
    ),
    lambda w, p: int(w.reader(p["token"]).functions.totalSupply().call()),
)
query(
    "query_current_block_number",
    lambda p, n: plain_script('return {"query_result": w3.eth.block_number}'),
    lambda w, p: int(w.chain.w3.eth.block_number),
    AnswerSpec("an integer: the latest block number"),
)
query(
    "query_gas_price",
    lambda p, n: plain_script('return {"query_result": w3.eth.gas_price}'),
    lambda w, p: int(w.chain.w3.eth.gas_price),
    AnswerSpec("an integer: the gas price in wei"),
)
query(
    "query_transaction_count_nonce",
    lambda p, n: plain_script(f'return {{"query_result": w3.eth.get_transaction_count({p["account"]!r})}}'),
    lambda w, p: int(w.chain.w3.eth.get_transaction_count(p["account"])),
    AnswerSpec("an integer: the account's transaction count (nonce)"),
)
