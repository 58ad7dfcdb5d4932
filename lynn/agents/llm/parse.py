"""Model reply -> env action. A reply that cannot be parsed is returned as is, so the env reports the
problem in ``info["error"]`` (the agent never hides a bad generation behind a guess)."""

from __future__ import annotations

import re

_FENCE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(?P<code>.*?)(?:\n```|\Z)", re.S | re.I)
_CALL = re.compile(r"^\s*(?:`)?(?P<call>[a-z_]+\(.*\))(?:`)?\s*$", re.M)


def parse_evm_reply(text: str) -> str:
    """EVMQuest: the first fenced Python block (an unclosed fence runs to the end), or a JSON control
    message such as ``{"done": true}`` as is; otherwise the raw text. A compact-form script's
    ``abi("Contract", "fn", ...)`` references are left for the env to expand
    (:mod:`lynn.envs.evmquest.compact`)."""
    stripped = text.strip()
    if stripped.startswith("{"):
        return stripped
    m = _FENCE.search(text)
    if not m:
        return text
    return m.group("code").strip("\n")


def parse_web_reply(text: str) -> str:
    """LiveWeb: exactly one action call — the first line that is one ``name(...)`` call; otherwise the raw text."""
    m = _CALL.search(text)
    return m.group("call") if m else text.strip()
