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

Token strings come from ``tokenizer.decode([id])``: exact for byte-level BPE tokenizers (ours, GPT-2,
Qwen, LLaMA-3); a hex literal is ASCII, so partial UTF-8 bytes in other tokens do not matter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["HexCopyConstraint", "RowConstraint", "mask_logits"]

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
