"""Spaces shared by Lynn's envs: :class:`UnicodeText`, the text space of every text observation and action.

DESIGN's rule for text: a space whose ``contains`` accepts any Unicode and whose ``sample`` works
(``check_env`` calls it). Gymnasium's ``Text`` does not fit: its ``contains`` rejects characters
outside its sampling charset, and page text, instructions and LLM actions are bound to none. So
:class:`UnicodeText` is a plain ``Space[str]``, not a ``Text`` subclass: Gymnasium's charset-based
helpers refuse it up front (``flatten`` with ``NotImplementedError``, ``AsyncVectorEnv``'s shared
memory with ``CustomSpaceError``: pass ``shared_memory=False``) instead of failing at the first
character outside a charset.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = ["MAX_TEXT", "UnicodeText"]

#: Default ``max_length``: long enough for a page's accessibility tree or HTML.
MAX_TEXT = 2_000_000


class UnicodeText(spaces.Space[str]):
    """A text space that contains any Unicode string up to ``max_length`` characters and samples one.

    Args:
        max_length: the longest string the space contains.
        seed: seed of :meth:`sample`'s generator.
    """

    def __init__(self, max_length: int = MAX_TEXT, seed: int | np.random.Generator | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)
        self.max_length = max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        # Short samples (at most 63 characters, code points U+0020-U+2FFE: Latin, Greek, Cyrillic, arrows,
        # CJK radicals, ...): a random "action" of a million characters helps nobody.
        length = int(self.np_random.integers(0, min(self.max_length, 63) + 1))
        return "".join(chr(int(c)) for c in self.np_random.integers(32, 0x2FFF, size=length))

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"UnicodeText(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnicodeText) and other.max_length == self.max_length
