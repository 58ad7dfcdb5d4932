"""Query answers of Lynn/EVMQuest-v0 (default profile): one value per asked quantity, strictly.

An answer is what a script returns under ``query_result``. The default profile accepts exactly
one value for each quantity a task asks about, in one documented unit:

* amounts, balances, counts, block numbers, nonces, gas prices: an integer in base units (wei,
  10^-18 of a token or coin) — a JSON/Python ``int`` or a string of decimal digits (``"0x…"`` hex
  is accepted too, since JSON-RPC returns quantities that way); no floats, no whole units;
* addresses: a hex string, compared case-blind; other text: the exact string;
* yes/no questions: a boolean.

A task that asks one quantity takes a bare value. A task that asks several takes a JSON object
with named fields (:attr:`AnswerSpec.fields`); an atomic task needs all of them in one answer,
a composite may give them over several answers (the last value given for a field counts).
Lists, unknown fields and missing fields are refused at the step with a clear error, so a
script cannot "spray" many candidate values and have any one of them match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
UNIT_INT = "an integer in base units (wei: 10^-18 of a token or coin)"


@dataclass(frozen=True)
class AnswerSpec:
    """What a task's answer looks like: a single value, or named fields (name -> description)."""

    description: str = UNIT_INT
    fields: tuple[tuple[str, str], ...] = ()
    kind: str = "int"  # of a single value: int, address, text or bool

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.fields)

    def render(self) -> str:
        """The answer format as the prompt states it."""
        if not self.fields:
            return f'{{"query_result": <{self.description}>}}'
        inner = ", ".join(f'"{name}": <{desc}>' for name, desc in self.fields)
        return f'{{"query_result": {{{inner}}}}}'


def scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, str))


def check_shape(value: Any, spec: AnswerSpec | None, composite: bool) -> str | None:
    """Why ``value`` is not an acceptable answer for ``spec`` (None when it is)."""
    if spec is None:
        return "this task asks no question: send a transaction (or {'done': true} to finish)"
    if not spec.fields:
        if not scalar(value):
            return (
                f"an answer must be one value ({spec.description}), got {type(value).__name__}; "
                f"expected {spec.render()}"
            )
        return None
    if not isinstance(value, dict):
        return f"an answer must be an object with the fields {list(spec.names)}: {spec.render()}"
    unknown = sorted(str(k) for k in value if k not in spec.names)
    if unknown:
        return f"unknown answer field(s) {unknown}; the fields are {list(spec.names)}"
    missing = [name for name in spec.names if name not in value]
    if missing and not composite:
        return f"missing answer field(s) {missing}; expected {spec.render()}"
    bad = [k for k, v in value.items() if not scalar(v)]
    if bad:
        return f"answer field(s) {bad} must each hold one value (no lists or objects)"
    return None


def as_int(value: Any) -> int | None:
    """An integer answer (int, decimal digits or 0x-hex string); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"-?\d+", text):
            return int(text)
        if re.fullmatch(r"0x[0-9a-fA-F]{1,64}", text):
            return int(text, 16)
    return None


def matches(got: Any, want: Any) -> bool:
    """Strict comparison of one answered value with the truth."""
    if isinstance(want, bool):
        return got is want
    if isinstance(want, int):
        return as_int(got) == want
    if isinstance(want, str):
        if not isinstance(got, str):
            return False
        if ADDRESS.match(want):
            return got.strip().lower() == want.lower()
        return got == want
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and set(got) == set(want)
            and all(matches(got[k], w) for k, w in want.items())
        )
    return False


def merged_fields(answers: list[Any]) -> dict[str, Any]:
    """Named fields over all answers of an episode (the last value given for a field counts)."""
    out: dict[str, Any] = {}
    for answer in answers:
        if isinstance(answer, dict):
            out.update(answer)
    return out
