"""The TypeScript oracle of Lynn/EVMQuest-v0: one TypeScript/ethers v6 script per task instance.

Table-driven: each atomic task is one row (:data:`TS_ROWS`) — the contract's role, the ABI
functions it needs (taken from the same artifacts as the Python oracle), TypeScript statements
reading the chain, and the returned expression — rendered from the task instance's own params and
the env's display names. Composite tasks (:data:`TS_COMPOSITES`) are sequences of those rows, the
same plan as the Python oracle's steps. The scripts run in
:class:`~lynn.envs.evmquest.typescript.TypeScriptSandbox` like any agent's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

TsPart = Callable[[dict[str, Any], dict[str, str]], str]


@dataclass(frozen=True)
class TsRow:
    """One atomic task of the TypeScript oracle."""

    result: TsPart
    role: Callable[[dict[str, Any]], str] | None = None
    functions: tuple[str, ...] = ()
    pre: TsPart = lambda p, n: ""


def ts_str(value: Any) -> str:
    """A TypeScript string literal."""
    return json.dumps(str(value))


def ts_ether(amount: Any) -> str:
    return f"ethers.parseEther({ts_str(amount)})"


def ts_share(expr: str, percent: Any) -> str:
    """``percent``% of the bigint ``expr`` in integer arithmetic."""
    frac = Fraction(Decimal(str(percent))) / 100
    return f"({expr} * {frac.numerator}n) / {frac.denominator}n"


def ts_contract(n: dict[str, str], role: str) -> str:
    return f"deployedContracts[{ts_str(n[role])}]"


def _encode(fn: str, *args: str) -> str:
    return f"contract.interface.encodeFunctionData({ts_str(fn)}, [{', '.join(args)}])"


def _tx(fn: str, *args: str, value: str = "0n") -> TsPart:
    return lambda p, n: f"{{ to: await contract.getAddress(), data: {_encode(fn, *args)}, value: {value} }}"


def _role(key: str, default: str | None = None) -> Callable[[dict[str, Any]], str]:
    return lambda p: str(p.get(key, default)) if default is not None else str(p[key])


def _fixed(role: str) -> Callable[[dict[str, Any]], str]:
    return lambda p: role


def _native(to: TsPart, value: TsPart, data: TsPart = lambda p, n: '"0x"', extra: str = "") -> TsPart:
    return lambda p, n: f"{{ to: {to(p, n)}, value: {value(p, n)}, data: {data(p, n)}{extra} }}"


_RECIPIENT: TsPart = lambda p, n: ts_str(p["recipient"])  # noqa: E731
_ALLOWANCE_PRE: TsPart = lambda p, n: (  # noqa: E731
    f"const current: bigint = await contract.allowance(agentAddress, {ts_str(p['spender'])});"
)

_DEADLINE = 'const deadline = BigInt((await provider.getBlock("latest"))!.timestamp) + 600n;'


def _swap_pre(p: dict[str, Any], n: dict[str, str], quote_fn: str) -> str:
    pick = "[0]" if quote_fn == "getAmountsIn" else ".at(-1)"
    return (
        f"const amount = {ts_ether(p['amount'])};\n"
        f"const path = [{', '.join(ts_contract(n, str(r)) for r in p['path'])}];\n"
        f"{_DEADLINE}\n"
        f"const quote: bigint = (await contract.{quote_fn}(amount, path)){pick};"
    )


def _remove_pre(p: dict[str, Any], n: dict[str, str]) -> str:
    return (
        f"const pair = new ethers.Contract({ts_contract(n, p['pair'])}, "
        '["function balanceOf(address) view returns (uint256)"], provider);\n'
        f"const liquidity = {ts_share('(await pair.balanceOf(agentAddress))', p['percent'])};\n" + _DEADLINE
    )


TS_ROWS: dict[str, TsRow] = {
    # --- native coin
    "bnb_transfer_basic": TsRow(_native(_RECIPIENT, lambda p, n: ts_ether(p["amount"]))),
    "bnb_transfer_percentage": TsRow(
        _native(_RECIPIENT, lambda p, n: ts_share("balance", p["percent"])),
        pre=lambda p, n: "const balance = await provider.getBalance(agentAddress);",
    ),
    "bnb_transfer_max_amount": TsRow(
        lambda p, n: (
            f'{{ to: {ts_str(p["recipient"])}, value: balance - 21000n * feeCap, data: "0x", gasLimit: 21000n, '
            'maxFeePerGas: feeCap, maxPriorityFeePerGas: ethers.parseUnits("1", "gwei") }'
        ),
        pre=lambda p, n: (
            "const balance = await provider.getBalance(agentAddress);\n"
            'const block = await provider.getBlock("latest");\n'
            'const feeCap = 2n * (block?.baseFeePerGas ?? 0n) + ethers.parseUnits("1", "gwei");'
        ),
    ),
    "bnb_transfer_to_contract": TsRow(
        _native(lambda p, n: ts_contract(n, "fallback"), lambda p, n: ts_ether(p["amount"]))
    ),
    "bnb_transfer_with_message": TsRow(
        _native(
            _RECIPIENT,
            lambda p, n: ts_ether(p["amount"]),
            lambda p, n: f"ethers.hexlify(ethers.toUtf8Bytes({ts_str(p['message'])}))",
        )
    ),
    # --- wrapped coin
    "wbnb_deposit": TsRow(
        lambda p, n: _tx("deposit", value=ts_ether(p["amount"]))(p, n), _fixed("wrapped"), ("deposit",)
    ),
    "wbnb_withdraw": TsRow(
        lambda p, n: _tx("withdraw", ts_ether(p["amount"]))(p, n), _fixed("wrapped"), ("withdraw",)
    ),
    # --- ERC-20
    "erc20_transfer_fixed": TsRow(
        lambda p, n: _tx("transfer", ts_str(p["recipient"]), ts_ether(p["amount"]))(p, n),
        _role("token", "stable"),
        ("transfer",),
    ),
    "erc20_transfer_percentage": TsRow(
        lambda p, n: _tx("transfer", ts_str(p["recipient"]), ts_share("balance", p["percent"]))(p, n),
        _role("token", "stable"),
        ("transfer", "balanceOf"),
        lambda p, n: "const balance: bigint = await contract.balanceOf(agentAddress);",
    ),
    "erc20_transfer_max_amount": TsRow(
        lambda p, n: _tx("transfer", ts_str(p["recipient"]), "balance")(p, n),
        _role("token", "stable"),
        ("transfer", "balanceOf"),
        lambda p, n: "const balance: bigint = await contract.balanceOf(agentAddress);",
    ),
    "erc20_transferfrom_basic": TsRow(
        lambda p, n: _tx("transferFrom", ts_str(p["owner"]), ts_str(p["recipient"]), ts_ether(p["amount"]))(
            p, n
        ),
        _role("token", "stable"),
        ("transferFrom",),
    ),
    "erc20_approve": TsRow(
        lambda p, n: _tx("approve", ts_str(p["spender"]), ts_ether(p["amount"]))(p, n),
        _role("token", "stable"),
        ("approve",),
    ),
    "erc20_increase_allowance": TsRow(
        lambda p, n: _tx("approve", ts_str(p["spender"]), f"current + {ts_ether(p['amount'])}")(p, n),
        _role("token", "stable"),
        ("approve", "allowance"),
        _ALLOWANCE_PRE,
    ),
    "erc20_decrease_allowance": TsRow(
        lambda p, n: _tx("approve", ts_str(p["spender"]), f"current - {ts_ether(p['amount'])}")(p, n),
        _role("token", "stable"),
        ("approve", "allowance"),
        _ALLOWANCE_PRE,
    ),
    "erc20_revoke_approval": TsRow(
        lambda p, n: _tx("approve", ts_str(p["spender"]), "0n")(p, n), _role("token", "stable"), ("approve",)
    ),
    "erc20_burn": TsRow(
        lambda p, n: _tx("burn", ts_ether(p["amount"]))(p, n), _role("token", "stable"), ("burn",)
    ),
    "erc20_approve_and_call_1363": TsRow(
        lambda p, n: _tx(
            "approveAndCall(address,uint256)", ts_contract(n, "receiver1363"), ts_ether(p["amount"])
        )(p, n),
        _fixed("pay1363"),
        ("approveAndCall",),
    ),
    "erc20_transfer_with_callback_1363": TsRow(
        lambda p, n: _tx(
            "transferAndCall(address,uint256)", ts_contract(n, "receiver1363"), ts_ether(p["amount"])
        )(p, n),
        _fixed("pay1363"),
        ("transferAndCall",),
    ),
    # --- ERC-2612 permit: the env signs typed data for the agent (eth_signTypedData_v4 through the proxy)
    "erc20_permit": TsRow(
        lambda p, n: (
            "{ to: await contract.getAddress(), data: "
            + _encode(
                "permit", "agentAddress", ts_str(p["spender"]), "value", "deadline", "sig.v", "sig.r", "sig.s"
            )
            + ", value: 0n }"
        ),
        _role("token", "stable"),
        ("permit", "name", "nonces"),
        lambda p, n: (
            f"const value = {ts_ether(p['amount'])};\n"
            'const deadline = BigInt((await provider.getBlock("latest"))!.timestamp) + 3600n;\n'
            "const typed = {\n"
            "  types: {\n"
            "    EIP712Domain: [\n"
            '      { name: "name", type: "string" }, { name: "version", type: "string" },\n'
            '      { name: "chainId", type: "uint256" }, { name: "verifyingContract", type: "address" },\n'
            "    ],\n"
            "    Permit: [\n"
            '      { name: "owner", type: "address" }, { name: "spender", type: "address" },\n'
            '      { name: "value", type: "uint256" }, { name: "nonce", type: "uint256" },\n'
            '      { name: "deadline", type: "uint256" },\n'
            "    ],\n"
            "  },\n"
            '  primaryType: "Permit",\n'
            "  domain: {\n"
            '    name: await contract.name(), version: "1",\n'
            "    chainId: (await provider.getNetwork()).chainId.toString(), verifyingContract: await contract.getAddress(),\n"
            "  },\n"
            "  message: {\n"
            f"    owner: agentAddress, spender: {ts_str(p['spender'])}, value: value.toString(),\n"
            "    nonce: (await contract.nonces(agentAddress)).toString(), deadline: deadline.toString(),\n"
            "  },\n"
            "};\n"
            'const signature: string = await provider.send("eth_signTypedData_v4", [agentAddress, JSON.stringify(typed)]);\n'
            "const sig = ethers.Signature.from(signature);"
        ),
    ),
    "erc20_flashloan": TsRow(
        lambda p, n: _tx(
            "flashLoan",
            ts_contract(n, "flash_borrower"),
            ts_contract(n, "flash"),
            ts_ether(p["amount"]),
            '"0x"',
        )(p, n),
        _fixed("flash"),
        ("flashLoan",),
    ),
    # --- NFTs
    "erc721_transfer": TsRow(
        lambda p, n: _tx("transferFrom", "agentAddress", ts_str(p["recipient"]), f"{int(p['token_id'])}n")(
            p, n
        ),
        _fixed("nft"),
        ("transferFrom",),
    ),
    "erc721_safe_transfer": TsRow(
        lambda p, n: _tx(
            "safeTransferFrom(address,address,uint256)",
            "agentAddress",
            ts_str(p["recipient"]),
            f"{int(p['token_id'])}n",
        )(p, n),
        _fixed("nft"),
        ("safeTransferFrom",),
    ),
    "erc721_approve": TsRow(
        lambda p, n: _tx("approve", ts_str(p["spender"]), f"{int(p['token_id'])}n")(p, n),
        _fixed("nft"),
        ("approve",),
    ),
    "erc721_set_approval_for_all": TsRow(
        lambda p, n: _tx("setApprovalForAll", ts_str(p["operator"]), "true")(p, n),
        _fixed("nft"),
        ("setApprovalForAll",),
    ),
    "erc1155_transfer_single": TsRow(
        lambda p, n: _tx(
            "safeTransferFrom",
            "agentAddress",
            ts_str(p["recipient"]),
            f"{int(p['item_id'])}n",
            f"{int(p['amount'])}n",
            '"0x"',
        )(p, n),
        _fixed("multi"),
        ("safeTransferFrom",),
    ),
    "erc1155_safe_transfer_with_data": TsRow(
        lambda p, n: _tx(
            "safeTransferFrom",
            "agentAddress",
            ts_str(p["recipient"]),
            f"{int(p['item_id'])}n",
            f"{int(p['amount'])}n",
            f"ethers.toUtf8Bytes({ts_str(p['memo'])})",
        )(p, n),
        _fixed("multi"),
        ("safeTransferFrom",),
    ),
    # --- contract calls
    "contract_call_simple": TsRow(lambda p, n: _tx("increment")(p, n), _fixed("counter"), ("increment",)),
    "contract_call_with_params": TsRow(
        lambda p, n: _tx("postMessage", ts_str(p["message"]))(p, n), _fixed("board"), ("postMessage",)
    ),
    "contract_call_with_value": TsRow(
        lambda p, n: _tx("donate", value=ts_ether(p["amount"]))(p, n), _fixed("donation"), ("donate",)
    ),
    "contract_delegate_call": TsRow(
        lambda p, n: _tx("delegateSetValue", ts_contract(n, "delegate_target"), f"{int(p['value'])}n")(p, n),
        _fixed("delegate_caller"),
        ("delegateSetValue",),
    ),
    "contract_payable_fallback": TsRow(
        _native(
            lambda p, n: ts_contract(n, "fallback"),
            lambda p, n: ts_ether(p["amount"]),
            lambda p, n: ts_str(p["calldata"]),
        )
    ),
    # --- staking
    "stake_single_token": TsRow(
        lambda p, n: _tx("deposit", ts_ether(p["amount"]))(p, n), _role("pool"), ("deposit",)
    ),
    "stake_lp_tokens": TsRow(
        lambda p, n: _tx("deposit", ts_share("lp", p["percent"]))(p, n),
        _role("pool"),
        ("deposit",),
        lambda p, n: (
            f"const lpToken = new ethers.Contract({ts_contract(n, 'pair_wrapped_stable')}, "
            '["function balanceOf(address) view returns (uint256)"], provider);\n'
            "const lp: bigint = await lpToken.balanceOf(agentAddress);"
        ),
    ),
    "unstake_lp_tokens": TsRow(
        lambda p, n: _tx("withdraw", ts_share("staked", p["percent"]))(p, n),
        _role("pool"),
        ("withdraw", "stakedBalance"),
        lambda p, n: "const staked: bigint = await contract.stakedBalance(agentAddress);",
    ),
    "harvest_rewards": TsRow(lambda p, n: _tx("harvest")(p, n), _role("pool"), ("harvest",)),
    "emergency_withdraw": TsRow(
        lambda p, n: _tx("emergencyWithdraw")(p, n), _role("pool"), ("emergencyWithdraw",)
    ),
    # --- DEX: swaps and liquidity (quotes from the router, 1% slippage as the Python oracle)
    "swap_exact_bnb_for_tokens": TsRow(
        lambda p, n: _tx(
            "swapExactETHForTokens", ts_share("quote", 99), "path", "agentAddress", "deadline", value="amount"
        )(p, n),
        _fixed("router"),
        ("swapExactETHForTokens", "getAmountsOut"),
        lambda p, n: _swap_pre(p, n, "getAmountsOut"),
    ),
    "swap_exact_tokens_for_bnb": TsRow(
        lambda p, n: _tx(
            "swapExactTokensForETH", "amount", ts_share("quote", 99), "path", "agentAddress", "deadline"
        )(p, n),
        _fixed("router"),
        ("swapExactTokensForETH", "getAmountsOut"),
        lambda p, n: _swap_pre(p, n, "getAmountsOut"),
    ),
    "swap_exact_tokens_for_tokens": TsRow(
        lambda p, n: _tx(
            "swapExactTokensForTokens", "amount", ts_share("quote", 99), "path", "agentAddress", "deadline"
        )(p, n),
        _fixed("router"),
        ("swapExactTokensForTokens", "getAmountsOut"),
        lambda p, n: _swap_pre(p, n, "getAmountsOut"),
    ),
    "swap_tokens_for_exact_tokens": TsRow(
        lambda p, n: _tx(
            "swapTokensForExactTokens", "amount", ts_share("quote", 101), "path", "agentAddress", "deadline"
        )(p, n),
        _fixed("router"),
        ("swapTokensForExactTokens", "getAmountsIn"),
        lambda p, n: _swap_pre(p, n, "getAmountsIn"),
    ),
    "add_liquidity_bnb_token": TsRow(
        lambda p, n: _tx(
            "addLiquidityETH",
            "path[1]",
            "amountToken",
            "0n",
            ts_share("amountNative", 99),
            "agentAddress",
            "deadline",
            value="amountNative",
        )(p, n),
        _fixed("router"),
        ("addLiquidityETH", "getAmountsOut"),
        lambda p, n: (
            f"const amountNative = {ts_ether(p['amount'])};\n"
            f"const path = [{ts_contract(n, 'wrapped')}, {ts_contract(n, 'stable')}];\n"
            f"const amountToken = {ts_share('(await contract.getAmountsOut(amountNative, path)).at(-1)', 100.5)};\n"
            + _DEADLINE
        ),
    ),
    "add_liquidity_tokens": TsRow(
        lambda p, n: _tx(
            "addLiquidity",
            "path[0]",
            "path[1]",
            "amount",
            "amount",
            ts_share("amount", 98),
            ts_share("amount", 98),
            "agentAddress",
            "deadline",
        )(p, n),
        _fixed("router"),
        ("addLiquidity",),
        lambda p, n: (
            f"const amount = {ts_ether(p['amount'])};\n"
            f"const path = [{ts_contract(n, 'stable')}, {ts_contract(n, 'stable2')}];\n" + _DEADLINE
        ),
    ),
    "remove_liquidity_bnb_token": TsRow(
        lambda p, n: _tx(
            "removeLiquidityETH",
            ts_contract(n, "stable"),
            "liquidity",
            "0n",
            "0n",
            "agentAddress",
            "deadline",
        )(p, n),
        _fixed("router"),
        ("removeLiquidityETH",),
        lambda p, n: _remove_pre(p, n),
    ),
    "remove_liquidity_tokens": TsRow(
        lambda p, n: _tx(
            "removeLiquidity",
            ts_contract(n, "stable"),
            ts_contract(n, "stable2"),
            "liquidity",
            "0n",
            "0n",
            "agentAddress",
            "deadline",
        )(p, n),
        _fixed("router"),
        ("removeLiquidity",),
        lambda p, n: _remove_pre(p, n),
    ),
    # --- queries
    "query_bnb_balance": TsRow(
        lambda p, n: f"{{ query_result: await provider.getBalance({ts_str(p['account'])}) }}"
    ),
    "query_current_block_number": TsRow(lambda p, n: "{ query_result: await provider.getBlockNumber() }"),
    "query_gas_price": TsRow(lambda p, n: "{ query_result: (await provider.getFeeData()).gasPrice }"),
    "query_transaction_count_nonce": TsRow(
        lambda p, n: f"{{ query_result: await provider.getTransactionCount({ts_str(p['account'])}) }}"
    ),
    "query_erc20_balance": TsRow(
        lambda p, n: f"{{ query_result: await contract.balanceOf({ts_str(p['account'])}) }}",
        _role("token", "stable"),
        ("balanceOf",),
    ),
    "query_erc20_allowance": TsRow(
        lambda p, n: f"{{ query_result: await contract.allowance({ts_str(p['owner'])}, agentAddress) }}",
        _role("token", "stable"),
        ("allowance",),
    ),
    "query_token_total_supply": TsRow(
        lambda p, n: "{ query_result: await contract.totalSupply() }",
        _role("token", "stable"),
        ("totalSupply",),
    ),
    "query_token_metadata": TsRow(
        lambda p, n: (
            "{ query_result: { name: await contract.name(), symbol: await contract.symbol(), "
            "decimals: await contract.decimals() } }"
        ),
        _role("token", "stable"),
        ("name", "symbol", "decimals"),
    ),
    "query_nft_balance": TsRow(
        lambda p, n: f"{{ query_result: await contract.balanceOf({ts_str(p['account'])}) }}",
        _fixed("nft"),
        ("balanceOf",),
    ),
    "query_nft_owner": TsRow(
        lambda p, n: f"{{ query_result: await contract.ownerOf({int(p['token_id'])}n) }}",
        _fixed("nft"),
        ("ownerOf",),
    ),
    "query_nft_token_uri": TsRow(
        lambda p, n: f"{{ query_result: await contract.tokenURI({int(p['token_id'])}n) }}",
        _fixed("nft"),
        ("tokenURI",),
    ),
    "query_nft_approval_status": TsRow(
        lambda p, n: f"{{ query_result: await contract.getApproved({int(p['token_id'])}n) }}",
        _fixed("nft"),
        ("getApproved",),
    ),
    "query_pair_reserves": TsRow(
        lambda p, n: "{ query_result: { reserve0: reserves[0], reserve1: reserves[1] } }",
        _role("pair"),
        ("getReserves",),
        lambda p, n: "const reserves = await contract.getReserves();",
    ),
    "query_pending_rewards": TsRow(
        lambda p, n: "{ query_result: await contract.pendingReward(agentAddress) }",
        _role("pool"),
        ("pendingReward",),
    ),
    "query_staked_amount": TsRow(
        lambda p, n: "{ query_result: await contract.stakedBalance(agentAddress) }",
        _role("pool"),
        ("stakedBalance",),
    ),
    "query_swap_output_amount": TsRow(
        lambda p, n: (
            f"{{ query_result: (await contract.getAmountsOut({ts_ether(p['amount'])}, path)).at(-1) }}"
        ),
        _fixed("router"),
        ("getAmountsOut",),
        lambda p, n: f"const path = [{', '.join(ts_contract(n, r) for r in p['path'])}];",
    ),
    "query_swap_input_amount": TsRow(
        lambda p, n: f"{{ query_result: (await contract.getAmountsIn({ts_ether(p['amount'])}, path))[0] }}",
        _fixed("router"),
        ("getAmountsIn",),
        lambda p, n: f"const path = [{', '.join(ts_contract(n, r) for r in p['path'])}];",
    ),
}

TS_ROWS["swap_multihop_routing"] = TS_ROWS["swap_exact_tokens_for_tokens"]  # the path param has the hop


# Rows used only as composite steps: an unlimited approval of a contract (by role) as spender.
STEP_ROWS: dict[str, TsRow] = {
    "approve_contract": TsRow(
        lambda p, n: _tx("approve", ts_contract(n, p["spender_role"]), "ethers.MaxUint256")(p, n),
        _role("token"),
        ("approve",),
    ),
}

Plan = Callable[[dict[str, Any]], list[tuple[str, dict[str, Any]]]]


def _transfers(kind: str, k: int) -> Plan:
    task = "bnb_transfer_basic" if kind == "bnb" else "erc20_transfer_fixed"

    def plan(p: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        return [
            (task, {"token": p.get("token", "stable"), "recipient": p[f"r{i}"], "amount": p[f"amount{i}"]})
            for i in range(1, k + 1)
        ]

    return plan


def _approve_then(swap: str) -> Plan:
    return lambda p: [
        ("approve_contract", {"token": str(p["path"][0]), "spender_role": "router"}),
        (swap, {"amount": p["amount"], "path": p["path"]}),
    ]


# Composite tasks as sequences of the table's rows (atomic tasks and STEP_ROWS), each step's params
# taken from the composite's own; the same plan as the Python oracle's steps.
TS_COMPOSITES: dict[str, Plan] = {
    "composite_batch_transfer_2_bnb": _transfers("bnb", 2),
    "composite_batch_transfer_3_bnb": _transfers("bnb", 3),
    "composite_batch_transfer_2_tokens": _transfers("token", 2),
    "composite_batch_transfer_3_tokens": _transfers("token", 3),
    "composite_batch_mixed_transfers": lambda p: [
        ("bnb_transfer_basic", {"recipient": p["r1"], "amount": p["amount1"]}),
        ("erc20_transfer_fixed", {"token": "stable", "recipient": p["r2"], "amount": p["amount2"]}),
    ],
    "composite_batch_approve_2_tokens": lambda p: [
        ("erc20_approve", {"token": "stable", "spender": p["spender"], "amount": p["amount1"]}),
        ("erc20_approve", {"token": "gov", "spender": p["spender"], "amount": p["amount2"]}),
    ],
    "composite_wrap_unwrap_cycle": lambda p: [
        ("wbnb_deposit", {"amount": p["amount"]}),
        ("wbnb_withdraw", {"amount": p["amount"]}),
    ],
    "composite_approve_swap_tokens": _approve_then("swap_exact_tokens_for_tokens"),
    "composite_approve_swap_to_bnb": _approve_then("swap_exact_tokens_for_bnb"),
    "composite_approve_stake_tokens": lambda p: [
        ("approve_contract", {"token": "gov", "spender_role": "staking_pool"}),
        ("stake_single_token", {"amount": p["amount"], "pool": "staking_pool"}),
    ],
    "composite_approve_transferfrom": lambda p: [
        ("erc20_approve", {"token": "stable", "spender": _agent(), "amount": p["amount"]}),
        ("erc20_transferfrom_basic", {"owner": _agent(), "recipient": p["recipient"], "amount": p["amount"]}),
    ],
    "composite_approve_add_liquidity": lambda p: [
        ("approve_contract", {"token": "stable", "spender_role": "router"}),
        ("approve_contract", {"token": "stable2", "spender_role": "router"}),
        ("add_liquidity_tokens", {"amount": p["amount"], "pair": "pair_stable_stable2"}),
    ],
    "composite_approve_remove_liquidity": lambda p: [
        ("approve_contract", {"token": "pair_wrapped_stable", "spender_role": "router"}),
        ("remove_liquidity_bnb_token", {"percent": p["percent"], "pair": "pair_wrapped_stable"}),
    ],
}


def _agent() -> str:
    from lynn.envs.evmquest.world import AGENT

    return AGENT.address


def ts_composite_scripts(task_id: str, params: dict[str, Any], names: dict[str, str]) -> list[str]:
    """The TypeScript oracle's scripts for one composite instance, one per step.

    Raises:
        KeyError: the composite is not (yet) covered by :data:`TS_COMPOSITES`.
    """
    if task_id not in TS_COMPOSITES:
        raise KeyError(
            f"the TypeScript oracle does not cover {task_id!r} yet ({len(TS_COMPOSITES)} of 45 composites do)"
        )
    return [
        ts_oracle_script(step, step_params, names) for step, step_params in TS_COMPOSITES[task_id](params)
    ]


def ts_oracle_covers(task_id: str) -> bool:
    """Whether the TypeScript oracle has a script for ``task_id`` (atomic or composite)."""
    return task_id in TS_ROWS or task_id in TS_COMPOSITES


def ts_oracle_script(task_id: str, params: dict[str, Any], names: dict[str, str]) -> str:
    """The TypeScript oracle's script for one atomic task instance.

    Raises:
        KeyError: the task is not (yet) covered by :data:`TS_ROWS`.
    """
    from lynn.envs.evmquest.taskkit import abi_json
    from lynn.envs.evmquest.world import ROLE_ARTIFACT

    if task_id not in TS_ROWS and task_id not in STEP_ROWS:
        raise KeyError(
            f"the TypeScript oracle does not cover {task_id!r} yet ({len(TS_ROWS)} atomic tasks do)"
        )
    row = TS_ROWS.get(task_id) or STEP_ROWS[task_id]
    lines = [
        'import { ethers } from "ethers";',
        "",
    ]
    body = ["const provider = new ethers.JsonRpcProvider(providerUrl);"]
    if row.role is not None:
        role = row.role(params)
        lines.append(f"const ABI = {abi_json(ROLE_ARTIFACT[role], *row.functions)};")
        lines.append("")
        body.append(f"const contract = new ethers.Contract({ts_contract(names, role)}, ABI, provider);")
    pre = row.pre(params, names)
    if pre:
        body += pre.splitlines()
    body.append(f"return {row.result(params, names)};")
    lines += [
        "export async function executeSkill(",
        "  providerUrl: string,",
        "  agentAddress: string,",
        "  deployedContracts: Record<string, string>,",
        "): Promise<Record<string, unknown>> {",
        *[f"  {line}" for line in body],
        "}",
        "",
    ]
    return "\n".join(lines)
