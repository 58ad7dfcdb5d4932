"""Literal slots: the long literals of a task line become short names the model writes instead of copying them.

A small model copies a 40-hex-digit address or a five-digit amount from its prompt badly (EVMQuest's recipients
differ per instance, by design, and a 1.3M model writes ``0x8050…`` for ``0x21D7…``): the failure is the copy,
not the script. Masking literals (the *anonymisation* or *delexicalisation* of semantic parsing and
task-oriented dialogue: Dong & Lapata 2016, Finegan-Dollak et al. 2018) turns the copy into writing one short
name: the task line ``Send 0.064 BNB to 0x21D7…13.`` is shown as ``Send @N1 BNB to @A1.``, the model replies
``w3.to_wei('@N1', "ether")`` and ``'@A1'``, and :func:`unmask` puts the literals back before the script runs.

Only the lines that carry an instance's own values are masked (``Task:`` and ``Last result:``; not the step
counter or the agent's fixed address). Hex literals of any length are masked, numbers only from
:data:`MIN_NUMBER_CHARS` characters (``#5`` stays: one digit is one token to copy, and masking it would make
the model write ``@N1`` where another instance's ``[-1]`` needs a plain ``1``). The mapping is exact string
replacement both ways, so ``unmask(mask_reply(reply, slots), slots) == reply`` for every demonstration.
"""

from __future__ import annotations

import re

#: Lines of a prompt's user turn whose literals are masked.
MASKED_LINES = ("Task:", "Last result:")
#: The shortest number (digits and a decimal point) that is masked.
MIN_NUMBER_CHARS = 3
HEX = re.compile(r"0x[0-9a-fA-F]+")
NUMBER = re.compile(r"(?<![\w.@])\d+(?:\.\d+)?(?![\w])")
SLOT = re.compile(r"@[AN]\d+")


def _literals(text: str) -> list[str]:
    """The maskable literals of ``text`` in order of first appearance, hex literals before numbers."""
    out: list[str] = []
    for line in text.splitlines():
        if not line.startswith(MASKED_LINES):
            continue
        for h in HEX.findall(line):
            if h not in out:
                out.append(h)
        rest = HEX.sub(" ", line)
        for n in NUMBER.findall(rest):
            if len(n) >= MIN_NUMBER_CHARS and n not in out:
                out.append(n)
    return out


def slot_names(literals: list[str]) -> dict[str, str]:
    """Slot name -> literal: ``@A1, @A2, …`` for hex literals, ``@N1, …`` for numbers."""
    names: dict[str, str] = {}
    counts = {"A": 0, "N": 0}
    for lit in literals:
        kind = "A" if lit.startswith("0x") else "N"
        counts[kind] += 1
        names[f"@{kind}{counts[kind]}"] = lit
    return names


def _replace_literals(text: str, slots: dict[str, str]) -> str:
    """``text`` with every whole occurrence of a slot's literal written as the slot's name."""
    by_lit = {lit: name for name, lit in slots.items()}
    out = []
    for i, part in enumerate(
        re.split(r"(0x[0-9a-fA-F]+)", text)
    ):  # digits inside a hex literal are no number
        if i % 2:
            out.append(by_lit.get(part, part))
        else:
            out.append(NUMBER.sub(lambda m: by_lit.get(m.group(0), m.group(0)), part))
    return "".join(out)


def mask_prompt(user: str) -> tuple[str, dict[str, str]]:
    """The user turn with its task-line literals masked, and the slots (name -> literal)."""
    slots = slot_names(_literals(user))
    lines = [
        _replace_literals(line, slots) if line.startswith(MASKED_LINES) else line for line in user.split("\n")
    ]
    return "\n".join(lines), slots


def mask_reply(reply: str, slots: dict[str, str]) -> str:
    """A demonstration's reply with the slots' literals written as their names (what the model learns)."""
    return _replace_literals(reply, slots)


def unmask(text: str, slots: dict[str, str]) -> str:
    """The model's reply with slot names replaced by their literals (unknown names are left as written)."""
    return SLOT.sub(lambda m: slots.get(m.group(0), m.group(0)), text)


def mask_messages(messages: list[dict[str, str]]) -> tuple[list[dict[str, str]], dict[str, str]]:
    """A chat (system, user[, assistant]) with the user turn masked and, if present, the reply too."""
    out: list[dict[str, str]] = []
    slots: dict[str, str] = {}
    for m in messages:
        if m["role"] == "user":
            content, slots = mask_prompt(m["content"])
            out.append({**m, "content": content})
        else:
            out.append(dict(m))
    if out and out[-1]["role"] == "assistant":
        out[-1]["content"] = mask_reply(out[-1]["content"], slots)
    return out, slots
