"""Gas estimation for the embedded chain: py-evm's default answer with fewer executions.

py-evm's default estimator (``eth.estimators.gas.binary_gas_search_intrinsic_tolerance``) runs a
transaction at its intrinsic gas, at the block gas limit, and then at every midpoint of a bisection of
[intrinsic, block limit] down to a 21,000-wide bracket: ~13 executions per ``eth_estimateGas``, which
was most of an EVMQuest step's CPU on the embedded chain. :func:`replayed_gas_search` returns what it
returns -- the same value, or the same exception from the same run -- because it walks the same
midpoints in the same order and answers each one exactly as the default's run would; it only skips
the run where the answer is *proved* by the runs it has already made.

Recorded paths. Every run after the intrinsic one runs on a subclass of the state's computation class
(used for this estimate only; same semantics, same gas) that records, per frame (message), the gas it
started with and, in execution order, every check its gas met, with what the frame had spent before it:
each charge of py-evm's gas meter (opcodes, memory expansion, cold access, code deposit, precompiles),
EIP-2200's SSTORE sentry (more than 2,300 left), and each CALL/CREATE: its extra cost (value, new
account), the gas it asked for, the value stipend, and the child frame. In py-evm a run's gas can change
its course only there: a charge or the sentry passes or raises OutOfGas; a CALL gives its child
``min(request, L(held - extra))`` (plus 2,300 with value), a CREATE ``L(held)``, ``L(y) = y - y // 64``
(EIP-150); the GAS opcode reads it; and ``gas * price`` is deducted from the sender's balance. So where
a run read GAS only to feed the next CALL's request (then never below ``L``), did not read the sender's
balance or run code at the sender, and nothing else read or moved gas (a CALL refused for funds or depth,
a CREATE collision, a gas read elsewhere: the run is not used), a run of the same transaction on the same
state with other gas takes the recorded path for as long as every check comes out as recorded -- each
frame then holds the recorded amount at each check, shifted by the difference in its start gas and by what
children that burnt their gas (ran out, or failed otherwise) got more or less -- and ends as recorded. From
a recording, :func:`_walk` computes, for gas ``g``: the recorded outcome where every check comes out the
same (a frame that ran out of gas may run out at an earlier check of its own: its caller sees the same --
0, no output, its gas gone, its state undone); failure where the top frame is the first to run short (it
runs out of gas, whatever would follow); nothing where a child is first to run short (what its caller does
then is not on the path) -- unless another recording of this estimate saw that very frame run out of gas:
both walks vouch for the run at ``g`` up to that frame, and that recording's continuation decides.

So the block-limit run (a success) decides every midpoint from the least gas its path needs up (``_need``:
its largest check, a CALL's being what it must hold for its child's need through ``L``) and those below
where the top frame runs short first; the first failing midpoint that is run (a child ran short) usually
decides the later ones. The block-limit run is made first: like the default's intrinsic-gas run it spoofs
the gas price to 0, so it decides that run too (message gas 0: the top frame's first charge fails), which
is then made only where undecided, or where py-evm refuses the intrinsic gas before running it (run first,
as the default runs it, to raise as it raises). For the midpoints, which pay the transaction's price, the
block-limit recording is used only where the price changes nothing a run sees (the price deducted and
GASPRICE's value equal, as on the embedded chain's costless state). Each midpoint first gets py-evm's
transaction validation at its gas (the sender must afford ``gas * price + value``); where validation fails,
the midpoint is run, so that it raises exactly where and how the default's run raises. Anything not proved
is run, and recorded.

Where no recording applies, two older proofs still do: a successful run at ``s`` (same conditions, no frame
failed except by REVERT) succeeds at any ``g > s`` -- every frame gets at least the gas it had and spends the
same; a run in one frame without GAS or sender-balance reads that failed at ``h`` fails below ``h``. And
before the first midpoint that needs a run, one probe at ``used * 64 / 63 + 2,300`` (an exception in it is
ignored: it is not one of the default's runs) usually proves every midpoint above it. Over every EVMQuest
task's oracle and generic mutants, seeds 5-7 (3,552 estimates, all equal to the default's), an estimate
takes 1.25 executions (the block-limit run, and a failing midpoint's for about one in four) against 11.0
for the default; with seed 5, 1.27 against 2.97 with those older proofs alone (and the intrinsic run).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eth.exceptions import OutOfGas, Revert
from eth.vm.forks.spurious_dragon.computation import SpuriousDragonComputation
from eth.vm.gas_meter import GasMeter
from eth.vm.spoof import SpoofTransaction

# py-evm's default (binary_gas_search_intrinsic_tolerance) stops bisecting when its bracket is this narrow.
TOLERANCE = 21_000
_SSTORE_SENTRY = 2_300  # EIP-2200: SSTORE fails unless more than this is left
_CALL_STIPEND = 2_300  # what a CALL or CALLCODE with value adds to the child's gas
_GAS, _BALANCE, _SSTORE = 0x5A, 0x31, 0x55
_CALL, _CALLCODE = 0xF1, 0xF2
_CALLS = frozenset({_CALL, _CALLCODE, 0xF4, 0xFA})  # CALL, CALLCODE, DELEGATECALL, STATICCALL
_CREATES = frozenset({0xF0, 0xF5})  # CREATE, CREATE2


class _Frame:
    """One message's gas along a run: what it started with and its checks in execution order.

    A check is an int, ``spent + required``: the frame had spent ``spent`` there and needed at least
    ``required`` more (a charge, or EIP-2200's SSTORE sentry ``2,301``), so it passes with a start of at least
    that; or ``(spent, extra, stipend, cap, child, given)``: a CALL/CREATE holding ``start - spent``, which
    must cover ``extra`` (a CALL's value and new-account costs),
    and gives the child ``min(cap, L(rest)) + stipend`` where ``rest`` is what is held less ``extra``,
    ``L(y) = y - y // 64`` (EIP-150) and ``cap`` is the requested gas (None: CREATE, or a CALL fed by GAS,
    whose request is never below ``L(rest)``); it gave ``given`` (without the stipend) in this run.
    """

    __slots__ = (
        "computation", "start", "checks", "op", "running", "exiting", "expect_return", "gas_fed", "request",
        "oog", "burned", "need",
    )  # fmt: skip

    def __init__(self, computation: Any) -> None:
        self.computation = computation
        self.start: int = computation.msg.gas
        self.checks: list[Any] = []
        self.op: int | None = None
        self.running, self.exiting, self.expect_return = True, False, False
        self.gas_fed = False  # GAS, then this CALL
        self.request: int | None = None  # the gas the CALL being run asks for
        self.oog = self.burned = False  # set once the run is over (_recording)
        self.need: int | None = -1  # the least start for the recorded path (_need); -1: not yet computed


class _Trace:
    """What the wrapped opcodes, gas meters and messages saw during one run."""

    __slots__ = ("gas_reads", "gas_dependent", "sender", "frames", "opaque")

    def __init__(self, sender: bytes) -> None:
        self.sender = sender
        self.reset()

    def reset(self) -> None:
        self.gas_reads = 0
        self.gas_dependent = False
        self.frames: list[_Frame] = []
        self.opaque = False  # something read or spent gas in a way _Frame does not model


class _TracedMeter(GasMeter):
    """py-evm's gas meter, recording each charge (and what its frame had spent before it) in its frame."""

    frame: _Frame
    trace: _Trace
    spent: int  # before the last charge

    def consume_gas(self, amount: int, reason: str) -> None:
        remaining = self.gas_remaining
        self.spent = spent = self.start_gas - remaining
        if not self.frame.exiting:  # not the burn of a failed frame's rest
            self.frame.checks.append(spent + amount)
        if 0 <= amount <= remaining and not self.logger.show_debug2:  # GasMeter.consume_gas, less its call
            self.gas_remaining = remaining - amount
        else:
            super().consume_gas(amount, reason)

    def return_gas(self, amount: int) -> None:
        if not self.frame.expect_return:  # not a child's leftover (a refused CALL's gas): not modelled
            self.trace.opaque = True
        self.frame.expect_return = False
        super().return_gas(amount)


def _forwarded(gas: int) -> int:
    """EIP-150: the most a CALL/CREATE holding ``gas`` (after its extra cost) passes on."""
    return gas - gas // 64


def _word(value: int | bytes) -> int:
    return value if isinstance(value, int) else int.from_bytes(value, "big")


def _traced_computation_class(base: type, trace: _Trace) -> type:
    """``base`` with GAS and BALANCE reporting to ``trace`` and every frame's gas recorded in it (same
    semantics, same gas)."""
    opcodes = dict(base.opcodes)  # type: ignore[attr-defined]
    gas_op, balance_op = opcodes[_GAS], opcodes[_BALANCE]
    modelled = issubclass(base, SpuriousDragonComputation)  # EIP-150 forwarding, a failing code deposit fails

    def gas(computation: Any) -> None:
        trace.gas_reads += 1
        if computation.code.peek() not in _CALLS:
            trace.gas_dependent = True
        else:
            computation._gas_frame.gas_fed = True
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

    def marked(opcode: int, fn: Any) -> Any:
        """``fn`` with its frame knowing which opcode runs (a CALL: and the gas it asks for)."""

        def run(computation: Any) -> None:
            frame = computation._gas_frame
            frame.op = opcode
            if opcode in _CALLS:
                values = computation._stack.values
                frame.request = _word(values[-1]) if values and not frame.gas_fed else None
                frame.gas_fed = False
            children = len(computation.children)
            try:
                fn(computation=computation)
            finally:
                frame.op = None
            if (opcode in _CALLS or opcode in _CREATES) and len(computation.children) == children:
                trace.opaque = True  # refused (funds, depth, collision): gas kept or given back unmodelled

        # py-evm's debug2 log reads the mnemonic
        run.mnemonic = getattr(fn, "mnemonic", None) or getattr(
            getattr(fn, "__wrapped__", None), "mnemonic", ""
        )
        return run

    gas.mnemonic, balance.mnemonic = "GAS", "BALANCE"  # type: ignore[attr-defined]
    opcodes[_GAS], opcodes[_BALANCE] = marked(_GAS, gas), marked(_BALANCE, balance)
    for opcode in (_SSTORE, *_CALLS, *_CREATES):
        if opcode in opcodes:
            opcodes[opcode] = marked(opcode, opcodes[opcode])

    def __init__(self: Any, state: Any, message: Any, transaction_context: Any) -> None:
        base.__init__(self, state, message, transaction_context)
        frame = self._gas_frame = _Frame(self)
        trace.frames.append(frame)
        meter = self._gas_meter
        if type(meter) is GasMeter:
            meter.__class__ = _TracedMeter
            meter.frame, meter.trace = frame, trace
        else:
            trace.opaque = True

    def __exit__(self: Any, exc_type: Any, exc_value: Any, traceback: Any) -> Any:
        frame = self._gas_frame
        frame.exiting = True
        try:
            return base.__exit__(self, exc_type, exc_value, traceback)
        finally:
            frame.exiting = frame.running = False

    def get_gas_remaining(self: Any) -> int:
        frame = self.__dict__.get("_gas_frame")
        if frame is not None and frame.running and not frame.exiting:
            op = frame.op
            if op == _SSTORE:  # EIP-2200's sentry: the one read SSTORE makes
                meter = self._gas_meter
                frame.checks.append(meter.start_gas - meter.gas_remaining + _SSTORE_SENTRY + 1)
            elif op != _GAS and op not in _CALLS and op not in _CREATES:
                # (GAS is traced above; CALL's and CREATE's forwarding at apply_child_computation)
                trace.opaque = True
        return base.get_gas_remaining(self)

    def apply_child_computation(self: Any, child_msg: Any) -> Any:
        frame = self._gas_frame
        op = frame.op
        # Within a CALL/CREATE opcode only charges are recorded: the last is the child's gas.
        if (op not in _CALLS and op not in _CREATES) or not frame.checks or not modelled:
            trace.opaque = True
            return base.apply_child_computation(self, child_msg)
        # The charge just taken is the child's gas (a CALL's: plus its extra cost), out of what was held.
        meter = self._gas_meter
        spent = meter.spent
        fee = frame.checks.pop() - spent
        held = meter.start_gas - spent
        if op in _CREATES:
            extra, stipend, cap = 0, 0, None
            given = child_msg.gas
            if given != _forwarded(held) or fee != given:
                trace.opaque = True
        else:
            stipend = _CALL_STIPEND if child_msg.value and op in (_CALL, _CALLCODE) else 0
            cap, given = frame.request, child_msg.gas - stipend
            extra = fee - given
            if extra < 0 or held < extra:
                trace.opaque = True
            elif given != (_forwarded(held - extra) if cap is None else min(cap, _forwarded(held - extra))):
                trace.opaque = True
        child = base.apply_child_computation(self, child_msg)
        frame.checks.append((spent, extra, stipend, cap, child._gas_frame, given))
        frame.expect_return = True
        return child

    return type(
        f"GasTraced{base.__name__}",
        (base,),
        {
            "opcodes": opcodes,
            "__init__": __init__,
            "__exit__": __exit__,
            "get_gas_remaining": get_gas_remaining,
            "apply_child_computation": apply_child_computation,
        },
    )


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


_SAME, _SHORT = "same", "short"


def _walk(
    frame: _Frame, start: int, known: set[tuple[int, ...]], at: tuple[int, ...] = ()
) -> tuple[str | None, int]:
    """How ``frame``, given ``start`` gas, runs against its recording: ``_SAME`` (the same checks pass and fail
    -- for a frame that ran out of gas: it runs out at one of them -- so its caller sees the same outcome,
    output and state), ``_SHORT`` (a check of its own fails first: it runs out of gas there), or None (a child
    does otherwise, or it passes where the recording ran out: a path not recorded); and, for ``_SAME``, how
    much more it has left at its end than ``start - frame.start`` more than in the recording (children that
    burnt what they were given, more or less than in the recording, take that much less or more).

    ``at`` is where the frame is: the indices of the CALL/CREATE checks leading to it from the top frame.
    ``known`` holds the places where a frame is known to run out of gas in the run being decided (a walk of
    another recording of it found that frame ``_SHORT`` there); a child this recording saw run out of gas is
    ``_SAME`` there whatever its own walk says. A walk adds each place where it finds a child ``_SHORT``.
    """
    need = frame.need if frame.need != -1 else _need(frame)
    if need is not None and start >= need:
        return _SAME, 0
    base = start - frame.start
    shift = base  # what it holds at each check, beyond what it held there in the recording
    for index, check in enumerate(frame.checks):
        if type(check) is int:
            if frame.start + shift < check:
                return (_SAME if frame.oog else _SHORT), 0
        else:
            spent, extra, stipend, cap, child, given = check
            rest = frame.start - spent + shift - extra
            if rest < 0:
                return (_SAME if frame.oog else _SHORT), 0
            gas = _forwarded(rest) if cap is None else min(cap, _forwarded(rest))
            here = (*at, index)
            walked, more = _walk(child, gas + stipend, known, here)
            if walked is _SHORT:
                known.add(here)
            if walked is not _SAME and not (child.oog and here in known):
                return None, 0
            # What comes back: nothing from a child that burnt its gas (here and in the recording), else its
            # rest, which differs from the recording's by the difference in what it got and what it burnt.
            shift += given - gas if child.burned else more
    return (None, 0) if frame.oog else (_SAME, shift - base)


def _least_holding(target: int) -> int:
    """The least ``y >= 0`` with ``_forwarded(y) >= target``."""
    if target <= 0:
        return 0
    y = target + target // 63
    while _forwarded(y) < target:
        y += 1
    while _forwarded(y - 1) >= target:
        y -= 1
    return y


def _need(frame: _Frame) -> int | None:
    """The least start with which ``frame`` takes its recorded path (cached), where nothing in it ran out of gas
    or burnt it (then what it spends does not depend on its start): the largest check, a CALL's or CREATE's
    being what it must hold for its child's need (``_least_holding``); None where that is not so."""
    need: int | None = 0
    if frame.oog or frame.burned:
        need = None
    for check in frame.checks:
        if need is None:
            break
        if type(check) is int:
            need = max(need, check)
            continue
        spent, extra, stipend, cap, child, _ = check
        child_need = child.need if child.need != -1 else _need(child)
        if child_need is None:
            need = None
        elif cap is not None and cap + stipend < child_need:
            need = 2**256  # the child never gets enough for its path
        else:
            need = max(need, spent + extra + _least_holding(child_need - stipend))
    frame.need = need
    return need


class _Recording:
    """A traced run whose gas alone decides, along its path, the outcome of a run with other gas."""

    def __init__(self, root: _Frame, success: bool) -> None:
        self.root, self.success = root, success

    def outcome(self, message_gas: int, known: set[tuple[int, ...]]) -> bool | None:
        """Whether a run whose top message has ``message_gas`` succeeds, where this recording decides it: the
        same path gives the same outcome; the top frame running short first fails; else None (``known``: see
        _walk)."""
        walked, _ = _walk(self.root, message_gas, known)
        return self.success if walked is _SAME else False if walked is _SHORT else None


def _decide(recordings: list[_Recording], message_gas: int) -> bool | None:
    """Whether a run whose top message has ``message_gas`` succeeds, where one of ``recordings`` decides it."""
    known: set[tuple[int, ...]] = set()
    for _ in range(2):  # again where a later recording found where a frame runs out of gas
        found = len(known)
        for recording in recordings:
            answer = recording.outcome(message_gas, known)
            if answer is not None:
                return answer
        if len(known) == found:
            return None
    return None


def _recording(computation: Any, trace: _Trace) -> _Recording | None:
    """The run just traced as a _Recording (module docstring); None where something in it depends on gas, or
    spends it, otherwise than _Frame models."""
    if (
        trace.opaque
        or trace.gas_dependent
        or not trace.frames
        or computation._gas_frame is not trace.frames[0]
    ):
        return None
    if _runs_as_sender(_frames(computation), trace.sender):
        return None
    for frame in trace.frames:
        c = frame.computation
        if frame.running or frame.exiting or frame.op is not None:
            return None
        frame.burned = c.should_burn_gas
        frame.oog = c.is_error and isinstance(c.error, OutOfGas)
        if frame.oog:  # it must have run out at its last check, as recorded
            last = frame.checks[-1] if frame.checks else None
            if type(last) is not int or frame.start >= last:
                return None
    return _Recording(computation._gas_frame, not computation.is_error)


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
    # The default's first two runs: at the intrinsic gas (success: that is the answer), then at the block limit
    # (failure: its error is raised). Both spoof the gas price to 0, so the block-limit run's recording decides
    # the intrinsic run too, where it can: then it is not made. Where py-evm refuses the intrinsic gas before
    # running it, it is run first, as the default runs it, to raise as it raises.
    intrinsic_tx = SpoofTransaction(transaction, gas=intrinsic, gas_price=0)
    intrinsic_ran = False
    try:
        state.get_transaction_executor().validate_transaction(intrinsic_tx)
    except Exception:  # noqa: BLE001
        intrinsic_ran = True
        if not _probe(state, intrinsic_tx).is_error:
            return int(intrinsic)
    limit_tx = SpoofTransaction(transaction, gas=gas_limit, gas_price=0)
    trace = _Trace(transaction.sender)
    base_class = state.computation_class
    shadowed = "computation_class" in vars(state)
    state.computation_class = _traced_computation_class(base_class, trace)
    try:
        try:
            at_limit = _probe(state, limit_tx)
        except Exception:  # noqa: BLE001  (the default raises it only where the intrinsic run failed)
            if not intrinsic_ran and not _probe(state, intrinsic_tx).is_error:
                return int(intrinsic)
            raise
        limit_recording = _recording(at_limit, trace)
        used = intrinsic + at_limit.get_gas_used()  # before refunds: what the run had to hold
        first_mid = SpoofTransaction(transaction, gas=(gas_limit + intrinsic) // 2)
        proved_success, proved_failure = gas_limit, intrinsic  # run at these or beyond them: proved

        # Each traced run decides, along its path, the midpoints where gas alone decides (_Recording). The
        # block-limit run ran with the spoofed gas price: only where that changed nothing a run sees; there, a
        # one-frame run also fixes every answer except in (used, used + 2,301).
        recordings: list[_Recording] = []
        if not at_limit.is_error and _fee_terms(state, limit_tx) == _fee_terms(state, first_mid):
            if limit_recording is not None:
                recordings.append(limit_recording)
            if _proves_failure_below(at_limit, trace):
                proved_failure = max(proved_failure, used - 1)
                proved_success = min(proved_success, used + _SSTORE_SENTRY + 1)
        # A probe is wasted where the block-limit run already read its gas or the sender's balance, or decides
        # the midpoints above its least gas itself.
        gas_dependent = trace.gas_dependent or _runs_as_sender(_frames(at_limit), trace.sender)
        if not intrinsic_ran:
            answer = None if limit_recording is None else limit_recording.outcome(0, set())
            if answer is None:
                answer = not _probe(state, intrinsic_tx).is_error
            if answer:
                return int(intrinsic)
        if at_limit.is_error:
            raise at_limit.error

        def run(gas: int) -> bool:
            nonlocal proved_success, proved_failure
            trace.reset()
            computation = _probe(state, SpoofTransaction(transaction, gas=gas))
            if not computation.is_error and _proves_success_above(computation, trace):
                proved_success = min(proved_success, gas)
            if computation.is_error and _proves_failure_below(computation, trace):
                proved_failure = max(proved_failure, gas)
            recording = _recording(computation, trace)
            if recording is not None:
                recordings.append(recording)
            return not computation.is_error

        hint: int | None = None if gas_dependent or recordings else used * 64 // 63 + _SSTORE_SENTRY

        def proved(gas: int) -> bool | None:
            if gas >= proved_success:
                return True
            if gas <= proved_failure:
                return False
            return _decide(recordings, gas - intrinsic)

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
