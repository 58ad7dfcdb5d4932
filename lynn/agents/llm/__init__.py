"""LLM agents: :class:`LMPolicy` (render -> generate -> parse) over any :mod:`lynn.lm` backend."""

from __future__ import annotations

from lynn.agents.llm.parse import parse_evm_reply, parse_web_reply
from lynn.agents.llm.policy import LMPolicy

__all__ = ["LMPolicy", "parse_evm_reply", "parse_web_reply"]
