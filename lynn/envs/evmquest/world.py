"""The deterministic genesis of Lynn/EVMQuest-v0: accounts, contracts, liquidity, positions.

:func:`deploy_world` runs once per chain; the env snapshots right after and reverts to that
snapshot at every reset. Deployment order is fixed, so contract addresses are the same on every
backend and every run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils import keccak, to_checksum_address

from lynn.envs.evmquest.chain import Chain, ChainError

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
E18 = 10**18
MAX_UINT = 2**256 - 1
# Fixed fees (no per-transaction fee query): well above the base fee of every backend we run.
MAX_FEE = 50 * 10**9
PRIORITY_FEE = 10**9


@dataclass(frozen=True)
class Profile:
    """How a chain is named: native coin, wrapped token, DEX and token symbols."""

    name: str
    chain_id: int
    native: str
    wrapped: str
    dex: str
    stable: str
    stable2: str
    gov: str
    router: str
    factory: str


PROFILES: dict[str, Profile] = {
    "bsc": Profile(
        "bsc", 56, "BNB", "WBNB", "PancakeSwap V2", "USDT", "BUSD", "CAKE", "PancakeRouter", "PancakeFactory"
    ),
    "ethereum": Profile(
        "ethereum",
        1,
        "ETH",
        "WETH",
        "Uniswap V2",
        "USDC",
        "DAI",
        "UNI",
        "UniswapV2Router02",
        "UniswapV2Factory",
    ),
}

TOKEN_NAMES = {
    "bsc": {"stable": "Tether USD", "stable2": "Binance USD", "gov": "PancakeSwap Token"},
    "ethereum": {"stable": "USD Coin", "stable2": "Dai Stablecoin", "gov": "Uniswap"},
}


def _key(label: str) -> LocalAccount:
    return Account.from_key(keccak(text=f"lynn-evmquest/{label}"))


AGENT = _key("agent")
DEPLOYER = _key("deployer")
FRIEND = _key("friend")  # a second user: approved the agent for a transferFrom, owns some NFTs


@cache
def artifact(name: str) -> dict[str, Any]:
    """ABI and bytecode of a committed artifact."""
    return json.loads((ARTIFACTS / f"{name}.json").read_text())


def role_names(profile: Profile) -> dict[str, str]:
    """Role -> the key the agent sees in ``contracts`` under this profile."""
    p = profile
    return {
        "wrapped": p.wrapped,
        "stable": p.stable,
        "stable2": p.stable2,
        "gov": p.gov,
        "pay1363": "LPAY",
        "flash": "FUSD",
        "router": p.router,
        "factory": p.factory,
        "pair_wrapped_stable": f"{p.wrapped}_{p.stable}_LP",
        "pair_wrapped_gov": f"{p.wrapped}_{p.gov}_LP",
        "pair_stable_stable2": f"{p.stable}_{p.stable2}_LP",
        "nft": "LynnPunks",
        "multi": "LynnItems",
        "receiver1363": "Token1363Receiver",
        "flash_borrower": "FlashBorrower",
        "staking_pool": f"{p.gov}StakingPool",
        "lp_farm": "LPFarm",
        "counter": "Counter",
        "board": "MessageBoard",
        "donation": "DonationBox",
        "fallback": "FallbackReceiver",
        "delegate_target": "DelegateTarget",
        "delegate_caller": "DelegateCaller",
    }


ROLE_ARTIFACT = {
    "wrapped": "WETH9",
    "stable": "LynnToken",
    "stable2": "LynnToken",
    "gov": "LynnToken",
    "pay1363": "LynnToken1363",
    "flash": "LynnFlashToken",
    "router": "UniswapV2Router02",
    "factory": "UniswapV2Factory",
    "pair_wrapped_stable": "UniswapV2Pair",
    "pair_wrapped_gov": "UniswapV2Pair",
    "pair_stable_stable2": "UniswapV2Pair",
    "nft": "LynnNFT",
    "multi": "LynnMultiToken",
    "receiver1363": "Token1363Receiver",
    "flash_borrower": "FlashBorrower",
    "staking_pool": "RewardPool",
    "lp_farm": "RewardPool",
    "counter": "Counter",
    "board": "MessageBoard",
    "donation": "DonationBox",
    "fallback": "FallbackReceiver",
    "delegate_target": "DelegateTarget",
    "delegate_caller": "DelegateCaller",
}

# Genesis holdings of the agent (whole units) — tasks draw amounts well inside these.
AGENT_NATIVE = 100
AGENT_TOKENS = {"stable": 10_000, "stable2": 10_000, "gov": 1_000, "pay1363": 1_000}
AGENT_WRAPPED = 10
AGENT_NFTS = (1, 2, 3, 4, 5)
FRIEND_NFTS = (6, 7, 8)
AGENT_ITEMS = {1: 100, 2: 50, 3: 10}
FRIEND_ALLOWANCE = 2_000  # stable the friend approved the agent to pull
AGENT_GOV_STAKE = 100


@dataclass
class World:
    """Addresses of the genesis contracts, by role, plus helpers to call them."""

    chain: Chain
    profile: Profile
    addresses: dict[str, str] = field(default_factory=dict)
    nonces: dict[str, int] = field(default_factory=dict)
    _contracts: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def names(self) -> dict[str, str]:
        return role_names(self.profile)

    @property
    def contracts(self) -> dict[str, str]:
        """Display name -> address, as the agent sees it."""
        names = self.names
        return {names[role]: address for role, address in self.addresses.items()}

    def contract(self, role: str) -> Any:
        """A web3 contract object for ``role`` (built once: web3 takes ~2 ms to build one from its ABI)."""
        address = self.addresses[role]
        cached = self._contracts.get(role)
        if cached is None or cached.address != address:
            cached = self.chain.w3.eth.contract(address=address, abi=artifact(ROLE_ARTIFACT[role])["abi"])
            self._contracts[role] = cached
        return cached

    def reader(self, role: str) -> _Reader:
        """Fast read-only view of ``role``: ``reader(role).functions.fn(*args).call()``."""
        return _Reader(self, role)

    def read(self, role: str, fn: str, *args: Any) -> Any:
        """Call view function ``fn`` of ``role`` (one output -> the value, several -> a tuple)."""
        inputs, outputs, sel = function_abi(ROLE_ARTIFACT[role], fn, len(args))
        data = "0x" + sel + abi_encode(inputs, list(args)).hex()
        raw = self.chain.eth_call(self.addresses[role], data)
        values = tuple(
            to_checksum_address(v) if t == "address" else v
            for t, v in zip(outputs, abi_decode(outputs, raw), strict=True)
        )
        return values[0] if len(values) == 1 else values

    def abi(self, role: str) -> list[dict[str, Any]]:
        return artifact(ROLE_ARTIFACT[role])["abi"]

    # -- sending as a known account (genesis and task set-up only; the agent's txs go through the env)
    def send(self, account: LocalAccount, tx: dict[str, Any], gas: int = 600_000) -> Any:
        """Sign and send ``tx`` from ``account``; returns the receipt (raises if it reverted)."""
        w3 = self.chain.w3
        nonce = self.nonces.get(account.address)
        if nonce is None:
            nonce = w3.eth.get_transaction_count(account.address)
        full = {
            "chainId": self.chain.chain_id,
            "nonce": nonce,
            "gas": gas,
            "maxFeePerGas": MAX_FEE,
            "maxPriorityFeePerGas": PRIORITY_FEE,
            "value": 0,
            **tx,
        }
        signed = account.sign_transaction(full)
        tx_hash = w3.eth.send_raw_transaction(signed.raw_transaction)
        self.nonces[account.address] = nonce + 1
        receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30, poll_latency=0.01)
        if receipt["status"] != 1:
            raise ChainError(f"genesis transaction reverted: {tx}")
        return receipt

    def call(
        self, account: LocalAccount, role: str, fn: str, *args: Any, value: int = 0, gas: int = 600_000
    ) -> Any:
        data = self.contract(role).encode_abi(fn, args=list(args))
        return self.send(account, {"to": self.addresses[role], "data": data, "value": value}, gas=gas)

    def deploy(self, role: str, *args: Any, gas: int = 6_000_000) -> str:
        art = artifact(ROLE_ARTIFACT[role])
        ctor = next((item for item in art["abi"] if item.get("type") == "constructor"), None)
        data = art["bytecode"]
        if ctor is not None:
            types = [i["type"] for i in ctor["inputs"]]
            data += abi_encode(types, list(args)).hex()
        receipt = self.send(DEPLOYER, {"data": data}, gas=gas)
        self.addresses[role] = receipt["contractAddress"]
        return receipt["contractAddress"]

    def forget_nonces(self) -> None:
        """Nonces change on revert: read them from the chain again."""
        self.nonces.clear()


@cache
def function_abi(artifact_name: str, fn: str, n_args: int) -> tuple[list[str], list[str], str]:
    for item in artifact(artifact_name)["abi"]:
        if item.get("type") == "function" and item["name"] == fn and len(item["inputs"]) == n_args:
            inputs = [i["type"] for i in item["inputs"]]
            outputs = [o["type"] for o in item["outputs"]]
            return inputs, outputs, keccak(text=f"{fn}({','.join(inputs)})")[:4].hex()
    raise AttributeError(f"{artifact_name} has no function {fn} with {n_args} argument(s)")


class _Reader:
    def __init__(self, world: World, role: str) -> None:
        self._world = world
        self._role = role

    @property
    def functions(self) -> _Reader:
        return self

    def __getattr__(self, fn: str) -> Any:
        world, role = self._world, self._role

        class _Bound:
            def __init__(self, *args: Any) -> None:
                self.args = args

            def call(self) -> Any:
                return world.read(role, fn, *self.args)

        return _Bound


# The embedded chain's genesis per (profile, chain id): its database and the contracts' addresses.
_GENESIS: dict[tuple[str, int], tuple[dict[bytes, bytes], dict[str, str]]] = {}


def genesis_world(chain: Chain, profile: Profile) -> World:
    """:func:`deploy_world` on a fresh ``chain``; an embedded chain deploys once per process.

    Deployment is deterministic, so a later embedded chain starts from a copy of the first one's database
    instead of re-running its ~60 transactions (~3 s of CPU): the same blocks, contracts, balances and
    positions. Only block timestamps differ from a fresh deployment's: they count on from the first
    chain's genesis time (eth-tester takes it from the wall clock) instead of this chain's.
    """
    from lynn.envs.evmquest.chain import EmbeddedChain

    if not isinstance(chain, EmbeddedChain) or not chain.reuse_genesis:
        return deploy_world(chain, profile)
    key = (profile.name, chain.chain_id)
    if key in _GENESIS:
        kv, addresses = _GENESIS[key]
        chain.load_database(kv)
        return World(chain=chain, profile=profile, addresses=dict(addresses))
    world = deploy_world(chain, profile)
    _GENESIS[key] = (chain.database_copy(), dict(world.addresses))
    return world


def deploy_world(chain: Chain, profile: Profile) -> World:
    """Deploy and seed everything, deterministically. Returns the :class:`World`."""
    world = World(chain=chain, profile=profile)
    names = TOKEN_NAMES[profile.name]
    chain.fund(DEPLOYER.address, 100_000 * E18)
    chain.fund(AGENT.address, AGENT_NATIVE * E18)
    chain.fund(FRIEND.address, 10 * E18)
    world.forget_nonces()
    d = DEPLOYER
    supply = 1_000_000_000 * E18
    world.deploy("wrapped")
    world.deploy("stable", names["stable"], profile.stable, supply, d.address)
    world.deploy("stable2", names["stable2"], profile.stable2, supply, d.address)
    world.deploy("gov", names["gov"], profile.gov, supply, d.address)
    world.deploy("pay1363", "Lynn Pay Token", "LPAY", supply, d.address)
    world.deploy("flash", "Flash USD", "FUSD", supply, d.address)
    world.deploy("factory", d.address)
    world.deploy("router", world.addresses["factory"], world.addresses["wrapped"])
    world.deploy("nft", "Lynn Punks", "LPUNK", "ipfs://lynn-punks/")
    world.deploy("multi", "ipfs://lynn-items/{id}.json")
    world.deploy("receiver1363")
    world.deploy("flash_borrower")
    for role in ("counter", "board", "donation", "fallback", "delegate_target", "delegate_caller"):
        world.deploy(role)

    # Liquidity: 1 native = 300 stable = 100 gov; stable:stable2 = 1:1.
    router = world.addresses["router"]
    for token in ("stable", "stable2", "gov"):
        world.call(d, token, "approve", router, MAX_UINT)
    deadline = 2**40
    world.call(
        d,
        "router",
        "addLiquidityETH",
        world.addresses["stable"],
        300_000 * E18,
        0,
        0,
        d.address,
        deadline,
        value=1_000 * E18,
        gas=5_000_000,
    )
    world.call(
        d,
        "router",
        "addLiquidityETH",
        world.addresses["gov"],
        50_000 * E18,
        0,
        0,
        d.address,
        deadline,
        value=500 * E18,
        gas=5_000_000,
    )
    world.call(
        d,
        "router",
        "addLiquidity",
        world.addresses["stable"],
        world.addresses["stable2"],
        1_000_000 * E18,
        1_000_000 * E18,
        0,
        0,
        d.address,
        deadline,
        gas=5_000_000,
    )
    factory = world.contract("factory")
    for role, (a, b) in {
        "pair_wrapped_stable": ("wrapped", "stable"),
        "pair_wrapped_gov": ("wrapped", "gov"),
        "pair_stable_stable2": ("stable", "stable2"),
    }.items():
        world.addresses[role] = factory.functions.getPair(world.addresses[a], world.addresses[b]).call()

    world.deploy("staking_pool", world.addresses["gov"], world.addresses["gov"], E18)
    world.deploy("lp_farm", world.addresses["pair_wrapped_stable"], world.addresses["gov"], 2 * E18)
    for pool in ("staking_pool", "lp_farm"):
        world.call(d, "gov", "transfer", world.addresses[pool], 1_000_000 * E18)

    # The agent's holdings and open positions.
    a = AGENT
    for role, units in AGENT_TOKENS.items():
        world.call(d, role, "transfer", a.address, units * E18)
    world.call(a, "wrapped", "deposit", value=AGENT_WRAPPED * E18, gas=100_000)
    world.call(a, "stable", "approve", router, MAX_UINT)
    world.call(
        a,
        "router",
        "addLiquidityETH",
        world.addresses["stable"],
        3_000 * E18,
        0,
        0,
        a.address,
        deadline,
        value=10 * E18,
        gas=5_000_000,
    )
    world.call(a, "stable", "approve", router, 0)
    lp_balance = world.contract("pair_wrapped_stable").functions.balanceOf(a.address).call()
    world.call(a, "pair_wrapped_stable", "approve", world.addresses["lp_farm"], lp_balance // 2)
    world.call(a, "lp_farm", "deposit", lp_balance // 2)
    world.call(a, "gov", "approve", world.addresses["staking_pool"], AGENT_GOV_STAKE * E18)
    world.call(a, "staking_pool", "deposit", AGENT_GOV_STAKE * E18)
    for token_id in AGENT_NFTS:
        world.call(d, "nft", "mint", a.address, token_id)
    for token_id in FRIEND_NFTS:
        world.call(d, "nft", "mint", FRIEND.address, token_id)
    for item, amount in AGENT_ITEMS.items():
        world.call(d, "multi", "mint", a.address, item, amount)
    world.call(d, "stable", "transfer", FRIEND.address, 5_000 * E18)
    world.call(FRIEND, "stable", "approve", a.address, FRIEND_ALLOWANCE * E18)
    return world


def function_summary(abi: list[dict[str, Any]]) -> list[str]:
    """``name(type name, ...) -> (outputs) [payable|view]`` for each function of an ABI."""
    lines = []
    for item in abi:
        if item.get("type") != "function":
            continue
        ins = ", ".join(f"{i['type']} {i.get('name') or ''}".strip() for i in item.get("inputs", []))
        outs = ", ".join(o["type"] for o in item.get("outputs", []))
        mut = item.get("stateMutability", "")
        tag = f" [{mut}]" if mut in ("view", "pure", "payable") else ""
        lines.append(f"{item['name']}({ins})" + (f" -> ({outs})" if outs else "") + tag)
    return sorted(set(lines))
