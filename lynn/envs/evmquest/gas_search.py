"""Gas estimation for the embedded chain: py-evm's default answer with fewer executions.

py-evm's default estimator (``eth.estimators.gas.binary_gas_search_intrinsic_tolerance``) runs a
transaction at its intrinsic gas, at the block gas limit, and then at every midpoint of a bisection of
[intrinsic, block limit] down to a 21,000-wide bracket: ~13 executions per ``eth_estimateGas``, which
was most of an EVMQuest step's CPU on the embedded chain. :func:`replayed_gas_search` returns what it
returns -- the same value, or the same exception from the same run -- because it walks the same
midpoints in the same order and answers each one exactly as the default's run would; it only skips
the run where the answer is *proved* by a run it has already made.

The proof. Whether a run succeeds can depend on its gas only at a few points of py-evm's interpreter:
the gas meter running out (``OutOfGas``, including EIP-2200's 2,300-gas SSTORE sentry and a CALL's
extra cost), the GAS opcode, the 63/64 forwarding of CALL/CREATE, and the sender's balance, from which
``gas * price`` is deducted before the code runs. So when a run at gas ``s`` succeeded and

- no GAS opcode fed anything but the next CALL-family opcode's gas argument (Solidity's
  ``call(gas(), ...)``, where the value is capped by the 63/64 rule anyway),
- no BALANCE read the sender's balance and no code ran at the sender's address,
- no frame failed except by REVERT (a child that ran out of gas, or burnt it all, may not with more),

then a run at any ``g > s`` takes the same path -- every frame gets at least the gas it had and
spends the same -- and succeeds. Likewise a run without any call, GAS or sender-balance read that
failed at ``h`` fails at every ``g < h`` (it can only run out earlier, in its one frame); and such a
run at the block limit that used ``c`` gas past the intrinsic fails below ``intrinsic + c`` and
succeeds from ``intrinsic + c + 2,301`` (the SSTORE sentry needs more than 2,300 left). The GAS and
BALANCE checks are two wrapped opcodes on a subclass of the state's computation class, used for
this estimate only. Each midpoint first gets py-evm's transaction validation at its gas (the sender
must afford ``gas * price + value``); where validation fails, the midpoint is run, so that it raises
exactly where and how the default's run raises. Anything not proved is run. Before the first
midpoint that needs a run, one probe at ``used * 64 / 63 + 2,300`` (enough for one level of 63/64
forwarding plus a stipend) usually proves every midpoint above it; it is skipped where the
block-limit run read its gas or the sender's balance, and an exception in it is ignored (it is not
one of the default's runs). So the runs are the default's 2 + ~11 for a contract call with nested
calls: 2 + the probe + the midpoints below it (~2-5); for a call in one frame: 2; for a plain
transfer: 1, as in the default; and at most the default's + 1 where nothing can be proved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eth.exceptions import Revert
from eth.vm.spoof import SpoofTransaction

# py-evm's default (binary_gas_search_intrinsic_tolerance) stops bisecting when its bracket is this narrow.
TOLERANCE = 21_000
_SSTORE_SENTRY = 2_300  # EIP-2200: SSTORE fails unless more than this is left
_GAS, _BALANCE = 0x5A, 0x31
_CALLS = frozenset({0xF1, 0xF2, 0xF4, 0xFA})  # CALL, CALLCODE, DELEGATECALL, STATICCALL


class _Trace:
    """What the wrapped opcodes saw during one run."""

    __slots__ = ("gas_reads", "gas_dependent", "sender")

    def __init__(self, sender: bytes) -> None:
        self.sender = sender
        self.gas_reads = 0
        self.gas_dependent = False


def _traced_computation_class(base: type, trace: _Trace) -> type:
    """``base`` with GAS and BALANCE reporting to ``trace`` (same semantics, same gas)."""
    opcodes = dict(base.opcodes)  # type: ignore[attr-defined]
    gas_op, balance_op = opcodes[_GAS], opcodes[_BALANCE]

    def gas(computation: Any) -> None:
        trace.gas_reads += 1
        if computation.code.peek() not in _CALLS:
            trace.gas_dependent = True
        gas_op(computation=computation)

    def balance(computation: Any) -> None:
        values = computation._stack.values
        if not values:
            trace.gas_dependent = True  # it fails either way; prove nothing from this run
        else:
            top = values[-1]
            word = top if isinstance(top, bytes) else (top % 2**160).to_bytes(20, "big")
            if word[-20:].rjust(20, b"\x00") == trace.sender:
                trace.gas_dependent = True
        balance_op(computation=computation)

    gas.mnemonic = "GAS"  # type: ignore[attr-defined]  # py-evm's debug2 log reads it
    balance.mnemonic = "BALANCE"  # type: ignore[attr-defined]
    opcodes[_GAS], opcodes[_BALANCE] = gas, balance
    return type(f"GasTraced{base.__name__}", (base,), {"opcodes": opcodes})


def _frames(computation: Any) -> list[Any]:
    out, todo = [], [computation]
    while todo:
        frame = todo.pop()
        out.append(frame)
        todo.extend(frame.children)
    return out


def _runs_as_sender(frames: list[Any], sender: bytes) -> bool:
    return any(f.msg.storage_address == sender and f.msg.code for f in frames)


def _proves_success_above(computation: Any, trace: _Trace) -> bool:
    """A successful run whose success carries over to any larger gas (module docstring)."""
    if computation.is_error or trace.gas_dependent:
        return False
    frames = _frames(computation)
    if _runs_as_sender(frames, trace.sender):
        return False
    return all(not f.is_error or isinstance(f.error, Revert) for f in frames)


def _proves_failure_below(computation: Any, trace: _Trace) -> bool:
    """A run in one frame, reading no gas and not the sender's balance (module docstring)."""
    return (
        not computation.children
        and trace.gas_reads == 0
        and not trace.gas_dependent
        and not _runs_as_sender([computation], trace.sender)
    )


def _probe(state: Any, transaction: Any) -> Any:
    """Run ``transaction`` on ``state`` and undo it; the computation (py-evm's ``_get_computation_error``
    keeps only its error)."""
    snapshot = state.snapshot()
    try:
        return state.apply_transaction(transaction)
    finally:
        state.revert(snapshot)


def _fee_terms(state: Any, transaction: Any) -> tuple[int, int]:
    """What a run's execution sees of its fees: the price deducted per gas and GASPRICE's value."""
    return state.get_gas_price(transaction), state.get_transaction_context(transaction).gas_price


def replayed_gas_search(state: Any, transaction: Any) -> int:
    """The gas py-evm's default estimator returns (or the exception it raises), with fewer runs.

    Args:
        state: the state to estimate on (py-evm's ``Chain.estimate_gas`` passes a costless one).
        transaction: a signed or spoofed transaction with a ``sender``.

    Returns:
        What ``binary_gas_search_intrinsic_tolerance(state, transaction)`` returns; raises what it raises.
    """
    if not hasattr(transaction, "sender"):
        raise TypeError(
            "Transaction is missing attribute sender.",
            "If sending an unsigned transaction, use SpoofTransaction and provide the",
            "sender using the 'from' parameter",
        )
    intrinsic = transaction.intrinsic_gas
    gas_limit = state.gas_limit
    # The default's first two runs, as it makes them.
    if not _probe(state, SpoofTransaction(transaction, gas=intrinsic, gas_price=0)).is_error:
        return int(intrinsic)
    limit_tx = SpoofTransaction(transaction, gas=gas_limit, gas_price=0)
    trace = _Trace(transaction.sender)
    base_class = state.computation_class
    shadowed = "computation_class" in vars(state)
    state.computation_class = _traced_computation_class(base_class, trace)
    try:
        at_limit = _probe(state, limit_tx)
        if at_limit.is_error:
            raise at_limit.error
        used = intrinsic + at_limit.get_gas_used()  # before refunds: what the run had to hold
        first_mid = SpoofTransaction(transaction, gas=(gas_limit + intrinsic) // 2)
        proved_success, proved_failure = gas_limit, intrinsic  # run at these or beyond them: proved

        # The block-limit run ran with the spoofed gas price; where that changed nothing the run sees,
        # a one-frame run there fixes every answer except in (used, used + 2,301).
        if _fee_terms(state, limit_tx) == _fee_terms(state, first_mid) and _proves_failure_below(
            at_limit, trace
        ):
            proved_failure = max(proved_failure, used - 1)
            proved_success = min(proved_success, used + _SSTORE_SENTRY + 1)

        def run(gas: int) -> bool:
            nonlocal proved_success, proved_failure
            trace.gas_reads, trace.gas_dependent = 0, False
            computation = _probe(state, SpoofTransaction(transaction, gas=gas))
            if not computation.is_error and _proves_success_above(computation, trace):
                proved_success = min(proved_success, gas)
            if computation.is_error and _proves_failure_below(computation, trace):
                proved_failure = max(proved_failure, gas)
            return not computation.is_error

        # A probe is wasted where the block-limit run already read its gas or the sender's balance.
        gas_dependent = trace.gas_dependent or _runs_as_sender(_frames(at_limit), trace.sender)
        hint: int | None = None if gas_dependent else used * 64 // 63 + _SSTORE_SENTRY

        def proved(gas: int) -> bool | None:
            return True if gas >= proved_success else False if gas <= proved_failure else None

        def succeeds(gas: int) -> bool:
            """The answer the default's run at ``gas`` gives (it raises where that run raises)."""
            nonlocal hint
            try:
                state.get_transaction_executor().validate_transaction(SpoofTransaction(transaction, gas=gas))
            except Exception:  # noqa: BLE001  (run it: it raises as the default's run does)
                return run(gas)
            answer = proved(gas)
            if answer is None and hint is not None and proved_failure < hint < gas:
                try:
                    run(hint)
                except Exception:  # noqa: BLE001  (not one of the default's runs: it proves nothing)
                    pass
                hint = None
                answer = proved(gas)
            return run(gas) if answer is None else answer

        minimum_viable, maximum_out_of_gas = gas_limit, intrinsic
        while minimum_viable - maximum_out_of_gas > TOLERANCE:
            midpoint = (minimum_viable + maximum_out_of_gas) // 2
            if succeeds(midpoint):
                minimum_viable = midpoint
            else:
                maximum_out_of_gas = midpoint
        return int(minimum_viable)
    finally:
        if shadowed:
            state.computation_class = base_class
        else:
            del state.computation_class


def counted_estimate(
    estimator: Callable[[Any, Any], int], state: Any, transaction: Any
) -> tuple[tuple[Any, ...], int]:
    """``(outcome, executions)`` of one estimate: ``("gas", n)`` or ``("raises", type, args)``, and how many
    times ``estimator`` ran the transaction on ``state`` (for comparing estimators side by side: the test and
    benchmarks/bench_evm_gas_search.py)."""
    runs = 0
    apply = state.apply_transaction

    def counted(tx: Any) -> Any:
        nonlocal runs
        runs += 1
        return apply(tx)

    state.apply_transaction = counted
    try:
        outcome: tuple[Any, ...] = ("gas", estimator(state, transaction))
    except Exception as exc:  # noqa: BLE001  (the exception is the outcome compared)
        outcome = ("raises", type(exc), exc.args)
    finally:
        del state.apply_transaction
    return outcome, runs
