"""Observation -> chat messages, one renderer per env; the same text for training data and for acting.

A renderer is a pure function of the observation dict (no env object), so demonstrations written by
``lynn collect`` and the prompts :class:`lynn.agents.llm.LMPolicy` sends are byte-identical.

**EVMQuest** (``compact`` style, the default for in-repo models): a fixed system message stating the
script contract, then the instruction, the agent's address, the step, the last result (cut to
:data:`LAST_RESULT_CHARS`) and the contract names (scripts reach addresses through ``contracts[name]``,
so addresses are not repeated). Scripts may be written in the *compact form* (:func:`lynn.envs.evmquest.compact.compact_script`):
``abi("<Contract>", "<fn>", ...)`` names functions of one of the env's published contract ABIs instead of
inlining its JSON; :func:`~lynn.envs.evmquest.compact.expand_script` (applied by :func:`lynn.agents.llm.parse.parse_evm_reply`)
turns it back into the plain script the env runs. ``full`` style sends the env's own ``obs["prompt"]`` (every contract's
address and functions, ~16k characters) for large models behind an endpoint. The reply is one fenced
```` ```python ```` block, or ``{"done": true}`` to end a composite task.

*History* (``history=`` a list, for models trained with ``lynn train lm --history``): a ``Done:`` line after
the step lists what the earlier steps of the episode achieved, one short name per successful step
(:func:`evm_action_summary`: ``USDT.approve``, ``PancakeRouter.addLiquidityETH``, ``send``,
``answer:native_balance``). With only ``Step: 2`` a small model must count a composite task's plan from its
text, and it learns that badly (the 1.3M model ended 2-step tasks after one step, and got 8 of 23 of its own
training prompts at steps >= 1 wrong); with the achieved steps listed it reads where it is.

**LiveWeb**: a fixed system message listing the action syntax, then goal, URL, title, the last action
and its error, and the accessibility tree. *Truncation rule*: when the rendered chat does not fit the
model's context (the caller's ``fits`` predicate, usually "prompt tokens ≤ context − reply budget"),
the axtree keeps its first lines — the largest prefix of whole lines that fits, found by bisection —
and a last line ``… (N more lines)`` says how much was cut. The goal and the error are never cut.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

Messages = list[dict[str, str]]
EVMQUEST = "Lynn/EVMQuest-v0"
LIVEWEB = "Lynn/LiveWeb-v0"
WORLDMODEL = "Lynn/WebWorldModel-v0"
LAST_RESULT_CHARS = 400
#: Tokens kept free for a web action reply when a page is cut to the context (acting and training).
WEB_REPLY_BUDGET = 96

EVM_SYSTEM = (
    "You control an account on an EVM chain. Write Python that defines "
    "execute_skill(w3, agent_address, contracts) and returns an unsigned transaction "
    '{"to", "data", "value"} or {"query_result": value}; contracts maps names to addresses. '
    'abi("LynnToken", "transfer", ...) gives those functions of a published contract ABI. '
    'Reply with one ```python block. When a multi-step task is finished, reply {"done": true}.'
)
WEB_SYSTEM = (
    "You are a web agent in a browser. Reply with exactly one action, for example "
    "click('e12'), fill('e7', 'text'), select_option('e3', 'Blue'), press('e7', 'Enter'), "
    "goto('http://...'), go_back(), scroll(0, 500), send_msg_to_user('answer') or "
    "report_infeasible('reason'). Element ids are in [brackets] in the page."
)


_TARGET = re.compile(r"address=contracts\[['\"](\w+)['\"]\]")
_CALL = re.compile(r"encode_abi\(\s*['\"](\w+)['\"]")
_ANSWER_KEY = re.compile(r"['\"]query_result['\"]\s*:\s*\{\s*['\"](\w+)['\"]")


def evm_action_summary(reply: str) -> str:
    """A short name for what an EVMQuest reply does (no literals): ``Contract.function`` for a contract call,
    ``send`` for a plain value transfer, ``answer:KEY`` (or ``answer``) for a query result, ``done``."""
    if "execute_skill" not in reply and re.search(r"['\"]done['\"]\s*:\s*true", reply):
        return "done"
    if "query_result" in reply:
        key = _ANSWER_KEY.search(reply)
        return f"answer:{key.group(1)}" if key else "answer"
    call = _CALL.search(reply)
    if call:
        target = _TARGET.search(reply)
        return f"{target.group(1)}.{call.group(1)}" if target else call.group(1)
    return "send"


def evm_step_succeeded(last_result: str) -> bool:
    """Whether an EVMQuest ``last_result`` reports a step that counts: a mined transaction or a recorded answer."""
    text = str(last_result or "")
    return text.startswith("answer recorded:") or (
        text.startswith("transaction ") and " status=1 " in text + " "
    )


def _evm_messages(obs: dict[str, Any], style: str = "compact", history: list[str] | None = None) -> Messages:
    if style == "full":
        return [{"role": "user", "content": str(obs["prompt"])}]
    if style != "compact":
        raise ValueError(f"unknown EVMQuest prompt style {style!r}; choose compact or full")
    last = str(obs.get("last_result") or "")[:LAST_RESULT_CHARS]
    names = ", ".join(obs.get("contracts", {}))
    user = (
        f"Task: {obs['instruction']}\n"
        f"Address: {obs.get('agent_address', '')}\n"
        f"Step: {int(obs.get('step', 0))}\n"
        + (f"Done: {'; '.join(history) or 'nothing'}\n" if history is not None else "")
        + f"Last result: {last or 'none'}\n"
        f"Contracts: {names}"
    )
    return [{"role": "system", "content": EVM_SYSTEM}, {"role": "user", "content": user}]


def with_evm_history(messages: Messages, history: list[str]) -> Messages:
    """``messages`` (an EVMQuest compact chat rendered without history) with the ``Done:`` line of ``history``
    inserted where :func:`render` puts it, so recorded demonstrations train a ``--history`` model."""
    user = messages[1]["content"]
    head, sep, tail = user.partition("\nLast result: ")
    if not sep or "\nDone: " in head:
        raise ValueError("not an EVMQuest compact prompt without a Done: line")
    line = f"\nDone: {'; '.join(history) or 'nothing'}"
    return [messages[0], {**messages[1], "content": head + line + sep + tail}, *messages[2:]]


def _web_user(obs: dict[str, Any], axtree_lines: list[str], cut: int) -> str:
    tree = "\n".join(axtree_lines)
    if cut:
        tree += f"\n… ({cut} more lines)"
    err = str(obs.get("last_action_error") or "")
    return (
        f"Goal: {obs.get('goal', '')}\n"
        f"URL: {obs.get('url', '')}\n"
        f"Title: {obs.get('title', '')}\n"
        f"Last action: {obs.get('last_action') or 'none'}\n"
        + (f"Error: {err}\n" if err else "")
        + f"Page:\n{tree}"
    )


def _web_messages(obs: dict[str, Any], fits: Callable[[Messages], bool] | None = None) -> Messages:
    lines = str(obs.get("axtree", "")).splitlines()
    msgs = [
        {"role": "system", "content": WEB_SYSTEM},
        {"role": "user", "content": _web_user(obs, lines, 0)},
    ]
    return fit_web_messages(msgs, fits)


def fit_web_messages(messages: Messages, fits: Callable[[Messages], bool] | None) -> Messages:
    """Cut the page of a rendered web chat (the lines after ``Page:``) to the largest prefix of whole
    lines for which ``fits`` holds, ending with ``… (N more lines)``. Used when acting and when
    training, so a model trains on the same cut pages it sees."""
    if fits is None or fits(messages):
        return messages
    head, sep, tree = messages[-1]["content"].partition("Page:\n")
    if not sep:
        return messages
    lines = tree.splitlines()
    if lines and lines[-1].startswith("… (") and lines[-1].endswith(" more lines)"):
        lines = lines[:-1]

    def build(k: int) -> Messages:
        cut = len(lines) - k
        page = "\n".join(lines[:k]) + (f"\n… ({cut} more lines)" if cut else "")
        return [*messages[:-1], {"role": messages[-1]["role"], "content": head + sep + page}]

    lo, hi = 0, len(lines)  # build(hi) does not fit; find the largest lo that does (or 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(build(mid)):
            lo = mid
        else:
            hi = mid
    return build(lo)


def render(
    env_id: str,
    obs: dict[str, Any],
    *,
    style: str = "compact",
    fits: Callable[[Messages], bool] | None = None,
    history: list[str] | None = None,
) -> Messages:
    """The chat messages (system + user) a model sees for ``obs`` of ``env_id``.

    Args:
        env_id: ``Lynn/EVMQuest-v0``, ``Lynn/LiveWeb-v0`` or ``Lynn/WebWorldModel-v0``.
        obs: the env's observation dict.
        style: EVMQuest only: ``compact`` (default) or ``full`` (the env's own long prompt).
        fits: LiveWeb only: returns whether a rendering fits the model's context (see module docstring).
        history: EVMQuest only: the summaries of the episode's successful steps (a ``Done:`` line); ``None``
            leaves the line out (models trained without ``--history``).
    """
    env_id = env_id.removeprefix("lynn:")
    if env_id == EVMQUEST:
        return _evm_messages(obs, style, history)
    if env_id in (LIVEWEB, WORLDMODEL):
        return _web_messages(obs, fits)
    raise ValueError(f"no prompt renderer for {env_id!r}; LM agents support {EVMQUEST} and {LIVEWEB}")


def evm_reply(script: str) -> str:
    """The assistant reply for an EVMQuest action: a fenced Python block, or a JSON control message as is."""
    text = script.strip()
    if text.startswith("{"):
        return text
    return f"```python\n{text}\n```"


_ABI_LITERAL = re.compile(r"json\.loads\((?P<q>'[^'\n]*'|\"[^\"\n]*\")\)")


def _minimal_params(params: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for p in params:
        q: dict[str, Any] = {"type": p["type"]}
        if "components" in p:
            q["components"] = _minimal_params(p["components"])
        out.append(q)
    return out


def minimal_abi(script: str) -> str:
    """``script`` with every ``json.loads('<ABI JSON>')`` literal cut to what web3 needs to encode and decode.

    Solidity's ABI JSON carries ``internalType``, parameter names and ``stateMutability``, which neither
    ``encode_abi`` nor ``.call()`` reads: 70% of an oracle script's tokens (87 of 123 on average) are
    that ABI. Training on the minimal form (``type``/``name``/``inputs``/``outputs`` and tuple
    ``components``) leaves a model less to memorise and a shorter span between the instruction and
    the values it copies; web3 builds the same calldata from it (tested on every oracle task).
    Literals that are not an ABI list are left as they are.
    """

    def repl(m: re.Match[str]) -> str:
        import ast

        try:
            abi = json.loads(ast.literal_eval(m.group("q")))
        except (ValueError, SyntaxError):
            return m.group(0)
        if not isinstance(abi, list) or not all(isinstance(x, dict) and "type" in x for x in abi):
            return m.group(0)
        small = []
        for item in abi:
            entry: dict[str, Any] = {"type": item["type"]}
            if "name" in item:
                entry["name"] = item["name"]
            entry["inputs"] = _minimal_params(item.get("inputs", []))
            if item.get("outputs"):
                entry["outputs"] = _minimal_params(item["outputs"])
            small.append(entry)
        return f"json.loads({json.dumps(small, separators=(',', ':'))!r})"

    return _ABI_LITERAL.sub(repl, script)
