"""The embedded chain's gas estimator against py-evm's default, side by side on the same state and transaction.

Every ``eth_estimateGas`` of the EVMQuest episodes below, and hand-made transactions on a bare chain, go
to both estimators on the same py-evm state: the gas (or the exception: type and arguments) must be the
same, and ours must run the transaction fewer times (runs counted, not timed).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from eth.estimators.gas import binary_gas_search_intrinsic_tolerance as pyevm_default
from eth.vm.spoof import SpoofTransaction

from lynn.envs.evmquest.catalog import LOGIC
from lynn.envs.evmquest.evmquest_env import EVMQuestEnv, implemented_specs
from lynn.envs.evmquest.gas_search import counted_estimate, replayed_gas_search
from lynn.envs.evmquest.spec import generic_mutants, oracle_steps

# Tasks that send transactions (an atomic query only reads): the first of each split and category (30 of 90;
# every one of them is compared in benchmarks/bench_evm_gas_search.py, which prints how many estimates differ).
TX_TASKS = list(
    {
        (s.split, s.category): s.task_id
        for s in reversed(implemented_specs("all"))
        if s.split == "composite" or LOGIC[s.task_id].answer is None
    }.values()
)
COMPOSITES = {s.task_id for s in implemented_specs("composite")}
# Of a composite's generic mutants, the one that departs most from the oracle's transactions (a skipped approval
# makes the next step revert at every gas). An atomic task's mutants send the oracle's kind of transaction.
MUTANT_PREFERENCE = ("skip_approve_step", "wrong_token_contract", "task_rule")

Outcome = tuple[Any, ...]


def _estimate(estimator: Callable[[Any, Any], int], state: Any, tx: Any) -> tuple[Outcome, int]:
    """``estimator``'s gas or exception on ``state``, and how many times it ran the transaction."""
    return counted_estimate(estimator, state, tx)


@dataclass
class Case:
    default: Outcome
    ours: Outcome
    default_runs: int
    our_runs: int


class SideBySide:
    """A chain's gas estimator that runs py-evm's default and ours on the same state; answers as the default."""

    def __init__(self) -> None:
        self.cases: list[Case] = []
        # The default's outcome by (state, transaction): a mutant's first steps repeat the oracle's on the same
        # state, and the default is deterministic, so it runs once per pair (ours runs every time).
        self._default: dict[tuple[Any, ...], tuple[Outcome, int]] = {}

    def __call__(self, state: Any, tx: Any) -> int:
        key = (
            state.state_root, state.block_number, state.timestamp, tx.sender, tx.to, tx.data, tx.value, tx.nonce,
            tx.max_fee_per_gas, tx.max_priority_fee_per_gas,
        )  # fmt: skip
        if key not in self._default:
            self._default[key] = _estimate(pyevm_default, state, tx)
        default, default_runs = self._default[key]
        ours, our_runs = _estimate(replayed_gas_search, state, tx)
        self.cases.append(Case(default, ours, default_runs, our_runs))
        if default[0] == "raises":
            raise default[1](*default[2])
        return int(default[1])


def _check(cases: list[Case]) -> None:
    for case in cases:
        assert case.ours == case.default, case
        if case.default_runs <= 2:  # the intrinsic gas sufficed, or the block-limit run failed: the same runs
            assert case.our_runs == case.default_runs, case
        else:  # at most one run more (the probe above the block-limit run's usage) where nothing is proved
            assert case.our_runs <= case.default_runs + 1, case
    searched = [c for c in cases if c.default_runs > 2]
    if searched:
        assert sum(c.our_runs for c in searched) < sum(c.default_runs for c in searched), cases


@pytest.fixture
def side_by_side(evm_env: EVMQuestEnv, monkeypatch: pytest.MonkeyPatch) -> Iterator[SideBySide]:
    evm_env.reset(seed=0)
    chain = evm_env.chain.tester.backend.chain
    estimator = SideBySide()
    # Class and object, as EmbeddedChain installs ours (eth-tester may rebuild the object).
    monkeypatch.setattr(type(chain), "gas_estimator", staticmethod(estimator))
    monkeypatch.setattr(chain, "gas_estimator", estimator)
    yield estimator


def _run(env: EVMQuestEnv, scripts: list[str]) -> None:
    for script in [*scripts, json.dumps({"done": True})]:
        _, _, terminated, truncated, _ = env.step(script)
        if terminated or truncated:
            return


@pytest.mark.parametrize("task_id", TX_TASKS)
def test_episode_estimates_equal_pyevm_default(
    evm_env: EVMQuestEnv, side_by_side: SideBySide, task_id: str
) -> None:
    """The oracle's transactions and, for a composite, a generic mutant's (as the soundness tests make them,
    seed 5)."""
    evm_env.reset(seed=5, options={"task_id": task_id})
    mutants = dict(generic_mutants(evm_env.instance, evm_env.names, evm_env.before, np.random.default_rng(1)))
    _run(evm_env, oracle_steps(evm_env.instance, evm_env.names, evm_env.before))
    if task_id in COMPOSITES:
        name = next(n for p in MUTANT_PREFERENCE for n in mutants if n.startswith(p))
        evm_env.reset(seed=5, options={"task_id": task_id})
        _run(evm_env, mutants[name])
    _check(side_by_side.cases)


@pytest.mark.parametrize(
    ("task_id", "mutant"),
    [
        ("composite_approve_swap_tokens", "skip_approve_step_0"),
        ("composite_approve_transferfrom", "skip_approve_step_0"),
    ],
)
def test_mutant_reverting_at_every_gas_raises_the_same(
    evm_env: EVMQuestEnv, side_by_side: SideBySide, task_id: str, mutant: str
) -> None:
    """A swap or transferFrom whose approval was skipped reverts at every gas: both estimators raise the same
    revert (and the env falls back to a fixed gas limit)."""
    evm_env.reset(seed=5, options={"task_id": task_id})
    mutants = dict(generic_mutants(evm_env.instance, evm_env.names, evm_env.before, np.random.default_rng(1)))
    _run(evm_env, mutants[mutant])
    assert any(c.default[0] == "raises" for c in side_by_side.cases), side_by_side.cases
    _check(side_by_side.cases)


# ---------------------------------------------------------------------------------------- hand-made cases
OPS = {
    "STOP": 0x00, "ADD": 0x01, "LT": 0x10, "GT": 0x11, "ISZERO": 0x15, "POP": 0x50, "MSTORE": 0x52,
    "MSTORE8": 0x53, "SLOAD": 0x54, "SSTORE": 0x55, "JUMPI": 0x57, "GAS": 0x5A, "JUMPDEST": 0x5B,
    "DUP1": 0x80, "DUP2": 0x81, "SWAP1": 0x90, "ORIGIN": 0x32, "BALANCE": 0x31, "CALL": 0xF1,
    "REVERT": 0xFD, "INVALID": 0xFE,
}  # fmt: skip


def asm(*items: str | int | bytes) -> bytes:
    """EVM bytecode: opcode names, ints (pushed with the shortest PUSH), ``"@x"`` (a JUMPDEST labelled x)
    and ``"&x"`` (PUSH2 of label x's offset)."""
    code, labels, fixups = bytearray(), {}, {}
    for item in items:
        if isinstance(item, str) and item.startswith("@"):
            labels[item[1:]] = len(code)
            code.append(OPS["JUMPDEST"])
        elif isinstance(item, str) and item.startswith("&"):
            code.append(0x61)
            fixups[len(code)] = item[1:]
            code += b"\x00\x00"
        elif isinstance(item, str):
            code.append(OPS[item])
        else:
            data = (
                item
                if isinstance(item, bytes)
                else item.to_bytes(max(1, (item.bit_length() + 7) // 8), "big")
            )
            code.append(0x5F + len(data))
            code += data
    for at, label in fixups.items():
        code[at : at + 2] = labels[label].to_bytes(2, "big")
    return bytes(code)


SENDER = b"\x5e" * 20
CONTRACT, CHILD = b"\xc0" * 19 + b"\x01", b"\xc0" * 19 + b"\x02"
GWEI = 10**9
SENDER_BALANCE = 10**18
MEMORY_FOR_2M_GAS = 1_000_000  # MSTORE8 there: ~2.0M gas of memory expansion in a handful of opcodes

CONTRACTS: dict[str, bytes] = {
    # Succeeds with more than 1M gas left or less than 50k, reverts in between (a gasleft() band).
    "gas_band": asm(
        "GAS", 1_000_000, "DUP2", "GT", "&ok", "JUMPI", 50_000, "SWAP1", "LT", "&ok", "JUMPI", 0, "DUP1", "REVERT",
        "@ok", "STOP",
    ),
    # Calls CHILD with all its gas (Solidity's call(gas(), ...)); if the call fails (the child needs ~2M gas) it
    # stops at once, if it succeeds it spends ~90k more: fails in a band just under what the block-limit run used.
    "catches_child_out_of_gas": asm(
        0, 0, 0, 0, 0, CHILD, "GAS", "CALL", "ISZERO", "&cheap", "JUMPI", 0, 190_000, "MSTORE8", "STOP",
        "@cheap", "STOP",
    ),
    # Succeeds while the sender, charged gas * price up front, keeps at least 1 ETH - 5M gwei, or once it has
    # at most 1 ETH - 20M gwei: reads BALANCE(ORIGIN).
    "reads_sender_balance": asm(
        "ORIGIN", "BALANCE", SENDER_BALANCE - 5_000_000 * GWEI, "DUP2", "LT", "ISZERO", "&ok", "JUMPI",
        SENDER_BALANCE - 20_000_000 * GWEI + 1, "SWAP1", "LT", "&ok", "JUMPI", 0, "DUP1", "REVERT", "@ok", "STOP",
    ),
    "reverts_with_data": asm(0xDEADBEEF, 0, "MSTORE", 4, 28, "REVERT"),
    "invalid_opcode": asm("INVALID"),
    # One frame: a counter in slot 0.
    "counter": asm(1, 0, "SLOAD", "ADD", 0, "SSTORE", "STOP"),
    # A no-op SSTORE (2,200 gas) still needs more than 2,300 left (EIP-2200).
    "sstore_sentry": asm(0, 0, "SSTORE", "STOP"),
    "memory_hungry": asm(0, MEMORY_FOR_2M_GAS, "MSTORE8", "STOP"),
}  # fmt: skip
CHILD_CODE = asm(0, MEMORY_FOR_2M_GAS, "MSTORE8", "STOP")


@pytest.fixture(scope="module")
def bare_chain() -> Any:
    from eth_tester import PyEVMBackend

    return PyEVMBackend().chain


def side_by_side_on(
    chain: Any,
    *,
    to: bytes,
    code: bytes = b"",
    value: int = 0,
    data: bytes = b"",
    balance: int = SENDER_BALANCE,
    legacy: bool = False,
    nonce_offset: int = 0,
) -> Case:
    """Both estimators on one costless state holding ``code`` at ``to`` (and CHILD's code) and ``balance``."""
    vm = chain.get_vm()
    with vm.in_costless_state() as state:
        state.set_balance(SENDER, balance)
        if code:
            state.set_code(to, code)
        state.set_code(CHILD, CHILD_CODE)
        fields = {
            "nonce": state.get_nonce(SENDER) + nonce_offset,
            "gas": 21_000,
            "to": to,
            "value": value,
            "data": data,
        }
        if legacy:
            tx = vm.create_unsigned_transaction(gas_price=GWEI, **fields)
        else:
            tx = vm.get_transaction_builder().new_unsigned_dynamic_fee_transaction(
                chain_id=chain.chain_id,
                max_fee_per_gas=GWEI,
                max_priority_fee_per_gas=GWEI,
                access_list=(),
                **fields,
            )
        spoofed = SpoofTransaction(tx, from_=SENDER)
        default, default_runs = _estimate(pyevm_default, state, spoofed)
        ours, our_runs = _estimate(replayed_gas_search, state, spoofed)
    return Case(default, ours, default_runs, our_runs)


@pytest.mark.parametrize("legacy", [False, True], ids=["eip1559", "legacy"])
@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_hand_made_contracts(bare_chain: Any, name: str, legacy: bool) -> None:
    case = side_by_side_on(bare_chain, to=CONTRACT, code=CONTRACTS[name], legacy=legacy)
    assert case.ours == case.default, case
    assert case.our_runs <= case.default_runs, case
    if name in (
        "counter",
        "sstore_sentry",
        "memory_hungry",
    ):  # one frame, no GAS: the block-limit run proves it
        assert case.our_runs <= 3 < case.default_runs, case


def test_gas_dependent_contracts_are_searched_like_the_default(bare_chain: Any) -> None:
    """The non-monotone contracts make the default's answer differ from the least gas the block-limit run
    needed -- the cases an inference from monotonicity gets wrong."""
    band = side_by_side_on(bare_chain, to=CONTRACT, code=CONTRACTS["gas_band"])
    assert band.default[0] == "gas" and band.default[1] > 1_000_000 and band.ours == band.default
    caught = side_by_side_on(bare_chain, to=CONTRACT, code=CONTRACTS["catches_child_out_of_gas"])
    # The default ends on the cheap path (the child ran out of gas at a midpoint), far below the ~2.1M used.
    assert caught.default[0] == "gas" and caught.default[1] < 100_000 and caught.ours == caught.default
    balance = side_by_side_on(bare_chain, to=CONTRACT, code=CONTRACTS["reads_sender_balance"])
    assert (
        balance.default[0] == "gas" and balance.default[1] >= 20_000_000 and balance.ours == balance.default
    )


def test_errors_are_the_defaults(bare_chain: Any) -> None:
    reverts = side_by_side_on(bare_chain, to=CONTRACT, code=CONTRACTS["reverts_with_data"])
    assert reverts.default[0] == "raises" and reverts.default[1].__name__ == "Revert"
    assert reverts.default[2] == (b"\xde\xad\xbe\xef",) and reverts.ours == reverts.default
    # A sender who can afford the intrinsic gas but not the block limit at the fee cap.
    poor = side_by_side_on(bare_chain, to=CONTRACT, code=CONTRACTS["counter"], balance=10**16)
    assert poor.default[0] == "raises" and "cannot afford" in poor.default[2][0] and poor.ours == poor.default
    # The value on top of the block limit's fee: also refused where the default refuses it.
    dear = side_by_side_on(bare_chain, to=CONTRACT, code=CONTRACTS["counter"], value=SENDER_BALANCE - 10**16)
    assert dear.default[0] == "raises" and dear.ours == dear.default
    stale = side_by_side_on(bare_chain, to=CONTRACT, code=CONTRACTS["counter"], nonce_offset=1)
    assert stale.default[0] == "raises" and "nonce" in str(stale.default[2]) and stale.ours == stale.default


@pytest.fixture(scope="module")
def berlin_chain() -> Any:
    from eth.vm.forks import BerlinVM
    from eth_tester import PyEVMBackend

    return PyEVMBackend(vm_configuration=((0, BerlinVM),)).chain


@pytest.mark.parametrize("name", ["counter", "catches_child_out_of_gas", "memory_hungry"])
def test_pre_london_sender_affording_only_part_of_the_block_limit(berlin_chain: Any, name: str) -> None:
    """Before London the default's first two runs are free (gas price 0) and its midpoints are not: a sender who
    can pay for 10M gas passes the block-limit run and is refused at the first midpoint (15M gas)."""
    rich = side_by_side_on(berlin_chain, to=CONTRACT, code=CONTRACTS[name], legacy=True)
    assert rich.default[0] == "gas" and rich.ours == rich.default and rich.our_runs < rich.default_runs
    poor = side_by_side_on(
        berlin_chain, to=CONTRACT, code=CONTRACTS[name], legacy=True, balance=10_000_000 * GWEI
    )
    assert poor.default[0] == "raises" and "cannot afford" in poor.default[2][0] and poor.default_runs == 3
    assert poor.ours == poor.default and poor.our_runs == 3


def test_plain_transfer_is_the_intrinsic_gas_in_one_run(bare_chain: Any) -> None:
    for legacy in (False, True):
        case = side_by_side_on(bare_chain, to=b"\x77" * 20, value=12345, legacy=legacy)
        assert case.default == case.ours == ("gas", 21_000) and case.default_runs == case.our_runs == 1
    # With calldata to an account without code: still one run, intrinsic gas with the data's cost.
    case = side_by_side_on(bare_chain, to=b"\x77" * 20, data=b"\x01\x00")
    assert case.default == case.ours == ("gas", 21_000 + 16 + 4) and case.our_runs == 1


def test_contract_creation(bare_chain: Any) -> None:
    case = side_by_side_on(bare_chain, to=b"", data=CONTRACTS["counter"])
    assert case.default[0] == "gas" and case.ours == case.default and case.our_runs < case.default_runs
