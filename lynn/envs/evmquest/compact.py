"""EVMQuest's compact script form: ``abi("<Contract>", "<fn>", ...)`` in place of inline ABI JSON.

The form names functions of the env's published contract ABIs (``lynn/envs/evmquest/artifacts``), so a
small model writes the call, the contract's name and the literals instead of memorising ABI JSON (70%
of an oracle script's tokens). :func:`compact_script` and :func:`expand_script` are exact inverses on
every oracle script (``tests/lm/test_compact.py``); the LM parser expands a reply before the env runs it,
so the env's own contract is unchanged. It lives with the env because it reads the env's artifacts
(``lynn.lm`` imports no env module).
"""

from __future__ import annotations

import json
import re
from typing import Any

from lynn.lm.prompts import evm_reply

#: Compact-form ABI reference in a script: ``abi("LynnToken", "transfer", "balanceOf")``.
_ABI_CALL = re.compile(r"\babi\((?P<args>\s*\"[A-Za-z0-9_]+\"(?:\s*,\s*\"[A-Za-z0-9_]+\")*\s*)\)")
_ABI_LOADS = re.compile(r"json\.loads\((?P<q>'[^'\n]*'|\"[^\"\n]*\")\)")


def _artifact_names() -> list[str]:
    """Published contract ABIs: the env's ERC-20 ``LynnToken`` first, then smallest first, so a call several
    contracts share (a token's ``approve``) always gets one canonical name."""
    from lynn.envs.evmquest.world import ARTIFACTS, artifact

    names = [p.stem for p in ARTIFACTS.glob("*.json")]
    return sorted(names, key=lambda a: (a != "LynnToken", len(artifact(a)["abi"]), a))


def _abi_subset(art: str, functions: list[str]) -> list[dict[str, Any]] | None:
    """The functions ``functions`` of artifact ``art``'s ABI in the artifact's order (the oracle's
    :func:`lynn.envs.evmquest.taskkit.abi_json`), or None when the artifact or a function is unknown."""
    from lynn.envs.evmquest.world import ARTIFACTS, artifact

    if not (ARTIFACTS / f"{art}.json").exists():
        return None
    abi = artifact(art)["abi"]
    picked = [it for it in abi if it.get("type") == "function" and it.get("name") in functions]
    if {it["name"] for it in picked} != set(functions):
        return None
    return picked


def compact_script(script: str) -> str:
    """An EVMQuest script with each inline ABI literal replaced by a reference to the contract's published ABI.

    ``json.loads('<ABI JSON>')`` becomes ``abi("<Artifact>", "<fn>", ...)`` when the JSON is exactly those
    functions of one of the env's published contract ABIs (``lynn/envs/evmquest/artifacts``; the oracle
    writes its ABIs that way). 70% of an oracle script's tokens are ABI JSON; the compact form leaves the
    model the call, the contract's name and the literals. :func:`expand_script` is its exact inverse, so
    the env receives the same script the oracle sends (tested on every oracle task). Literals that match
    no published ABI, and everything else in the script, are left as they are.
    """

    def repl(m: re.Match[str]) -> str:
        import ast

        try:
            abi = json.loads(ast.literal_eval(m.group("q")))
        except (ValueError, SyntaxError):
            return m.group(0)
        if not isinstance(abi, list) or not abi or not all(isinstance(x, dict) for x in abi):
            return m.group(0)
        names = [x.get("name") for x in abi]
        if not all(isinstance(n, str) for n in names):
            return m.group(0)
        names = list(dict.fromkeys(names))  # an overloaded function is named once: all its overloads
        for art in _artifact_names():
            if _abi_subset(art, names) == abi:
                return "abi(" + ", ".join(json.dumps(x) for x in [art, *names]) + ")"
        return m.group(0)

    out = _ABI_LOADS.sub(repl, script)
    if out != script and "json." not in out:
        out = re.sub(r"^import json\n\n?", "", out, count=1, flags=re.M)
    return out


def expand_script(script: str) -> str:
    """The inverse of :func:`compact_script`: each ``abi("<Artifact>", "<fn>", ...)`` becomes the
    ``json.loads('<ABI JSON>')`` of those functions of the env's published ABI (``import json`` is added).

    A reference to an unknown contract or function is left as written, so the script fails in the
    sandbox with a ``NameError`` the env reports (``info["error"]``); a script without references is
    returned unchanged.
    """

    def repl(m: re.Match[str]) -> str:
        art, *names = json.loads("[" + m.group("args") + "]")
        picked = _abi_subset(art, names)
        if picked is None:
            return m.group(0)
        # Ordered as the reference names them (the oracle's ``abi_json`` orders by the artifact).
        return f"json.loads({json.dumps(picked, separators=(',', ':'))!r})"

    out = _ABI_CALL.sub(repl, script)
    if out != script and not re.search(r"^import json\b", out, re.M):
        out = "import json\n\n" + out
    return out


def compact_reply(message: dict[str, str]) -> dict[str, str]:
    """An assistant message whose fenced script is put in the compact form (control messages unchanged)."""
    text = message["content"]
    m = re.match(r"```python\n(?P<code>.*)\n```$", text.strip(), re.S)
    if not m:
        return message
    return {**message, "content": evm_reply(compact_script(m.group("code")))}
