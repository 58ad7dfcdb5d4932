"""Copy constraints: decoding masks that make a reply's literals copies of literals in its prompt.

A small model fails EVMQuest mostly by mis-copying the 40-hex-digit addresses of its instruction
(measured on the held-out atomic tasks: 22 of 48 failures were an address one or more digits off, or an
unterminated literal after the copy went astray). Every ``0x`` literal in the oracle's 4,076 training
scripts is either the bare ``0x`` (empty calldata) or a literal that appears verbatim in the prompt, so
:class:`HexCopyConstraint` restricts decoding to exactly that language: while a reply writes a hex
literal, only tokens that keep it a prefix of one of the prompt's literals (or of ``0x``) are allowed,
and it may only end on a complete one. It never excludes what the oracle writes, and it changes
nothing outside hex literals.

It is a *decoding* rule (like grammar-constrained decoding in Outlines or llama.cpp's GBNF): the
model is unchanged, and every figure that uses it is reported beside the unconstrained one. Why ours:
Outlines/transformers-cfg constrain to a grammar fixed in advance, not to "a substring of this
prompt"; ours is a few dozen lines over decoded token strings, and plugs into both transformers'
``generate`` (:meth:`HexCopyConstraint.logits_processor`) and our speculative loop
(:func:`lynn.lm.speculative.speculative_generate` ``constraint=``), where strict verification stays
lossless with respect to constrained greedy decoding.

:class:`LiteralCopyConstraint` (``copy_literals``) adds the amounts: a quoted literal that starts with a
digit (``w3.to_wei('0.235', "ether")``) must be one of the prompt's decimal numbers, written whole; a
quoted ``'0x…'`` is still a hex literal. Every quoted number in the oracle's scripts is a number of its
instruction (or the EIP-712 domain version ``"1"``), so this too never excludes what the oracle writes. Why not a grammar library (llguidance,
xgrammar, outlines, transformers-cfg): their grammars are compiled once and constrain *shape*; "a copy of
one of this prompt's literals" is a per-prompt set, which a grammar engine would have to recompile for
every prompt (or enumerate as alternatives), while here it is a set lookup per candidate token — and
the same object plugs into the speculative loop unchanged.

Token strings come from ``tokenizer.decode([id])``: exact for byte-level BPE tokenizers (ours, GPT-2,
Qwen, LLaMA-3); a hex literal is ASCII, so partial UTF-8 bytes in other tokens do not matter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["HexCopyConstraint", "LiteralCopyConstraint", "RowConstraint", "mask_logits"]

HEX = frozenset("0123456789abcdefABCDEF")
_LITERAL = re.compile(r"(?<![0-9A-Za-z_])0x[0-9a-fA-F]*")
# The literal being written at the end of a text: a boundary "0" (a literal may start with the next
# token's "x") or "0x" plus hex digits.
_OPEN = re.compile(r"(?<![0-9A-Za-z_])0(?:x[0-9a-fA-F]*)?$")


def _is_word(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "_")


class RowConstraint:
    """The constraint for one prompt: the literals it may copy, and a cache of masks by state.

    Decoding state after a text: ``none`` (no literal open; ``word`` says whether the last character
    is a word character, so a following ``0`` would not start a literal), ``zero`` (a boundary ``0``:
    a literal starts if ``x`` follows) or ``hex`` (writing the literal ``lit``).
    """

    def __init__(self, parent: HexCopyConstraint, literals: frozenset[str]) -> None:
        self.parent = parent
        self.literals = literals | {"0x"}
        self.prefixes = {lit[:i] for lit in self.literals for i in range(1, len(lit) + 1)}
        self._cache: dict[tuple[str, str, bool], Any] = {}

    def allows(self, s: str, state: str, lit: str, word: bool) -> bool:
        """Whether appending token text ``s`` in this state keeps every literal a copy."""
        for c in s:
            if state == "hex":
                if c in HEX:
                    lit += c
                    if lit not in self.prefixes:
                        return False
                    continue
                if lit not in self.literals:
                    return False
                state, word = "none", _is_word(c)
            elif state == "zero":
                if c == "x":
                    state, lit = "hex", "0x"
                    if lit not in self.prefixes:
                        return False
                else:
                    state, word = "none", _is_word(c)
            elif c == "0" and not word:
                state = "zero"
            else:
                word = _is_word(c)
        return True

    def banned(self, text: str) -> Any:
        """Ids not allowed after the reply text ``text`` (a cached LongTensor, maybe empty)."""
        m = _OPEN.search(text)
        lit = m.group(0) if m else ""
        state = "hex" if lit.startswith("0x") else "zero" if lit == "0" else "none"
        word = state == "none" and bool(text) and _is_word(text[-1])
        key = (state, lit, word)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        import torch

        strings = self.parent.token_strings
        ids = range(len(strings)) if state != "none" else self.parent.with_zero
        bad = [t for t in ids if not self.allows(strings[t], state, lit, word)]
        if len(bad) >= len(strings):  # nothing would be allowed: never dead-end the decoder
            bad = []
        out = torch.tensor(bad, dtype=torch.long)
        self._cache[key] = out
        return out


class HexCopyConstraint:
    """``0x`` literals in a reply must be copied from its prompt (or be the bare ``0x``).

    Args:
        tokenizer: the model's tokenizer (its ``decode`` gives each token's text).
    """

    name = "copy_hex"

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        size = len(tokenizer)
        self.token_strings = [tokenizer.decode([i]) for i in range(size)]
        # With no literal open only tokens holding a "0" can start one.
        self.with_zero = [i for i, s in enumerate(self.token_strings) if "0" in s]

    def for_prompt(self, prompt_text: str) -> RowConstraint:
        """The row constraint for a prompt (its literals are the ones a reply may copy)."""
        return RowConstraint(self, frozenset(_LITERAL.findall(prompt_text)))

    def for_prompt_ids(self, prompt_ids: Sequence[int]) -> RowConstraint:
        return self.for_prompt(self.tokenizer.decode(list(prompt_ids)))

    def text_of(self, ids: Sequence[int]) -> str:
        return "".join(self.token_strings[i] for i in ids if 0 <= i < len(self.token_strings))

    def logits_processor(self, prompts: Sequence[Sequence[int]], prompt_width: int) -> Any:
        """A transformers ``LogitsProcessor`` for a left-padded batch whose prompts end at ``prompt_width``."""
        from transformers import LogitsProcessor

        rows = [self.for_prompt_ids(p) for p in prompts]
        outer = self

        class _Processor(LogitsProcessor):
            def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
                for r, row in enumerate(rows):
                    bad = row.banned(outer.text_of(input_ids[r, prompt_width:].tolist()))
                    if len(bad):
                        scores[r, bad.to(scores.device)] = float("-inf")
                return scores

        return _Processor()


def mask_logits(z: torch.Tensor, bad: torch.Tensor) -> torch.Tensor:
    """``z`` (V,) with the ``bad`` ids set to -inf (a copy when anything is masked)."""
    if len(bad) == 0:
        return z
    z = z.clone()
    z[bad.to(z.device)] = float("-inf")
    return z


#: Quoted numbers a script may write that no instruction holds: the EIP-712 domain ``"version": "1"``.
CONSTANT_NUMBERS = frozenset({"1"})
_NUMBER = re.compile(r"(?<![0-9A-Za-z_.])\d+(?:\.\d+)?(?![0-9A-Za-z_])")
# A quoted number being written at the end of a text: the quote, then digits and dots.
_OPEN_NUM = re.compile(r"(['\"])([0-9][0-9.]*)$")


class LiteralRow(RowConstraint):
    """:class:`RowConstraint` plus quoted numbers (state ``num``: writing a quoted number ``lit``)."""

    def __init__(
        self, parent: LiteralCopyConstraint, literals: frozenset[str], numbers: frozenset[str]
    ) -> None:
        super().__init__(parent, literals)
        self.numbers = numbers
        self.num_prefixes = {n[:i] for n in numbers for i in range(1, len(n) + 1)}

    def allows_num(self, s: str, state: str, lit: str, word: bool, quote: str) -> bool:
        """Whether appending ``s`` keeps quoted numbers and hex literals copies."""
        for i, c in enumerate(s):
            if state == "num":
                if lit == "0" and c == "x":  # a quoted hex literal: the hex rules take over
                    return super().allows(s[i + 1 :], "hex", "0x", False) if "0x" in self.prefixes else False
                if c.isdigit() or c == ".":
                    lit += c
                    if lit not in self.num_prefixes:
                        return False
                    continue
                if c != quote or lit not in self.numbers:
                    return False
                state, word = "none", False
                continue
            if state == "none" and c in "'\"":
                if i + 1 < len(s) and s[i + 1].isdigit():
                    state, quote, lit = "num", c, ""
                    continue
                # A quote at the end of the token: the next token decides (see ``banned``).
            if state in ("none", "zero", "hex"):
                if not super().allows(c, state, lit, word):
                    return False
                state, lit, word = self._advance(c, state, lit, word)
        return True

    @staticmethod
    def _advance(c: str, state: str, lit: str, word: bool) -> tuple[str, str, bool]:
        if state == "hex":
            return ("hex", lit + c, False) if c in HEX else ("none", "", _is_word(c))
        if state == "zero":
            return ("hex", "0x", False) if c == "x" else ("none", "", _is_word(c))
        if c == "0" and not word:
            return "zero", "", False
        return "none", "", _is_word(c)

    def banned(self, text: str) -> Any:
        m = _OPEN_NUM.search(text)
        if m:
            key: tuple[Any, ...] = ("num", m.group(2), m.group(1))
        elif text and text[-1] in "'\"":
            key = ("quote", text[-1])
        else:
            return super().banned(text)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        import torch

        strings = self.parent.token_strings
        if key[0] == "num":
            bad = [t for t, s in enumerate(strings) if not self.allows_num(s, "num", key[1], False, key[2])]
        else:  # just after a quote: a token starting with a digit opens a quoted number
            bad = [
                t
                for t, s in enumerate(strings)
                if s[:1].isdigit() and not self.allows_num(key[1] + s, "none", "", False, "")
            ]
        if len(bad) >= len(strings):
            bad = []
        out = torch.tensor(bad, dtype=torch.long)
        self._cache[key] = out
        return out

    def allows(self, s: str, state: str, lit: str, word: bool) -> bool:  # tokens with no quote open
        return self.allows_num(s, state, lit, word, "")


class LiteralCopyConstraint(HexCopyConstraint):
    """``0x`` literals and quoted numbers in a reply must be copied from its prompt (see module docstring).

    Args:
        tokenizer: the model's tokenizer.
    """

    name = "copy_literals"

    def __init__(self, tokenizer: Any) -> None:
        super().__init__(tokenizer)
        # With no literal open, tokens holding a "0" or a quote can start one.
        self.with_zero = [i for i, s in enumerate(self.token_strings) if "0" in s or "'" in s or '"' in s]

    def for_prompt(self, prompt_text: str) -> RowConstraint:
        numbers = frozenset(_NUMBER.findall(prompt_text)) | CONSTANT_NUMBERS
        return LiteralRow(self, frozenset(_LITERAL.findall(prompt_text)), numbers)
