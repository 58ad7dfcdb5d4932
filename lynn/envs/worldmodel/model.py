"""The learned world model: a causal LM that writes Δ, run through :mod:`lynn.lm.backends`.

**Prompt** (chat messages, system + user; :func:`world_prompt`)::

    Goal: <goal>
    URL: <current URL, relative to the site's origin>
    Title: <title>
    Action: <the action string>
    Element: <the acted-on element's line, id and indentation removed> (/url: <its link, if any>)
    Similar:
    <the Δ of the nearest training transition (retrieval), cut to SIMILAR_CHARS>
    Page:
    <the current axtree without id prefix, cut to the context by whole lines (lynn.lm.prompts' rule)>

**Reply**: a Δ in the text format of :mod:`lynn.envs.worldmodel.delta`, ending with ``[End]``; training
targets longer than the reply budget are cut after a whole line and closed with ``[End]``.

Imagination is cheap because next pages mostly copy something the model already sees: the retrieved Δ
and the current page are in the prompt, so :class:`lynn.lm.speculative.PromptLookupDrafter` (copying
n-grams from the prompt) drafts long runs and our batched speculative decoding verifies them, many
rollouts per forward pass (``predict`` takes a batch). A :class:`~lynn.envs.worldmodel.baselines.PageMemory`
may complement the model (``page_memory=True``): when the Δ leaves the current URL for a page seen in
training, the remembered page replaces the written edits.

Backends: a folder from ``lynn train world-model`` (``worldmodel.json`` + ``lm/`` + ``memory.jsonl``),
any local Hugging Face causal-LM folder (prompted with the same text; no retrieval or memory unless a
``memory`` file is given), or an OpenAI-compatible endpoint (``llm_url=``; ``model`` names the served
model).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lynn.envs.worldmodel.baselines import (
    CopyModel,
    Item,
    MemoryModel,
    NearestNeighbourModel,
    PageMemory,
    element_block,
)
from lynn.envs.worldmodel.delta import END, action_target, page_frame, relative_url, strip_frame

CONFIG_FILE = "worldmodel.json"
MEMORY_FILE = "memory.jsonl"
STARTS_FILE = "starts.jsonl"
SIMILAR_CHARS = 1200
#: Tokens a Δ reply may take (training targets are cut to it; generation stops there).
REPLY_TOKENS = 320
WM_SYSTEM = (
    "You are a model of a website. Given the goal, the current page and the action, write the state "
    "change: [State change], URL, Title, Frame, Summary, [Edits] with hunks '@@ INDEX -COUNT = ANCHOR' "
    "and '+' lines, then [End]."
)
TRAIN_HINT = "train one with `lynn train world-model --data DIR --out DIR`"


def world_prompt(goal: str, obs: dict[str, Any], action: str, similar: str | None) -> list[dict[str, str]]:
    """The chat messages the world model reads for one step (see the module docstring)."""
    ax = str(obs.get("axtree", ""))
    page = strip_frame(ax, page_frame(ax))
    bid = action_target(action)
    target, link = element_block(ax, bid) if bid else ("", "")
    element = (target or "none") + (f" (/url: {link})" if link else "")
    sim = (similar or "none")[:SIMILAR_CHARS]
    user = (
        f"Goal: {goal}\n"
        f"URL: {relative_url(str(obs.get('url', '')), str(obs.get('url', '')))}\n"
        f"Title: {obs.get('title', '')}\n"
        f"Action: {action}\n"
        f"Element: {element}\n"
        f"Similar:\n{sim}\n"
        f"Page:\n{page}"
    )
    return [{"role": "system", "content": WM_SYSTEM}, {"role": "user", "content": user}]


def fit_prompt(messages: list[dict[str, str]], count: Any, budget: int) -> list[dict[str, str]]:
    """Cut the page of ``messages`` (whole lines) so that ``count(messages) <= budget`` tokens."""
    from lynn.lm.prompts import fit_web_messages

    return fit_web_messages(messages, lambda m: count(m) <= budget)


class LMWorldModel:
    """A causal LM writing Δ, with retrieval in the prompt and optionally a page memory.

    Args:
        generator: a :class:`lynn.lm.backends.Generator`.
        nn: the nearest-neighbour index whose Δ goes into the prompt (``None``: ``Similar: none``).
        memory: the page memory that replaces the edits of a Δ that opens a remembered page.
        context: the model's context in tokens; prompts are cut to ``context - max_new_tokens``.
        max_new_tokens: the reply budget.
        batch_size: prompts per generation batch.
        count: tokens of a prompt (chat messages), for a generator that cannot count (an endpoint).
    """

    name = "lm"

    def __init__(
        self,
        generator: Any,
        nn: NearestNeighbourModel | None = None,
        memory: PageMemory | None = None,
        context: int = 1024,
        max_new_tokens: int = REPLY_TOKENS,
        batch_size: int = 16,
        count: Any = None,
    ) -> None:
        self.generator = generator
        self.count = count
        self.nn = nn
        self.memory = memory
        self.context = int(context)
        self.max_new_tokens = int(max_new_tokens)
        self.batch_size = int(batch_size)
        self.last_stats: list[dict[str, Any]] = []

    def prompts(self, batch: Sequence[Item]) -> list[list[dict[str, str]]]:
        out = []
        count = getattr(self.generator, "count_tokens", None) or self.count
        for goal, obs, action in batch:
            similar = None
            if self.nn is not None:
                similar = self.nn.adapted(obs, self.nn.neighbour(goal, obs, action)).to_text()
            msgs = world_prompt(goal, obs, action, similar)
            if count is not None:
                msgs = fit_prompt(msgs, count, self.context - self.max_new_tokens)
            out.append(msgs)
        return out

    def predict(self, batch: Sequence[Item]) -> list[str]:
        """One Δ text per item; a reply cut at the token budget is closed with ``[End]`` (what was
        written applies) and noted in :attr:`last_stats`."""
        if not batch:
            return []
        prompts = self.prompts(batch)
        kwargs: dict[str, Any] = {}
        # In-process transformers: batch as asked. (An endpoint generator has a `model` too — the served
        # name — but no batch size: it sends the prompts concurrently.)
        if "batch_size" in inspect.signature(self.generator.generate).parameters:
            kwargs["batch_size"] = self.batch_size
        gens = self.generator.generate(prompts, max_new_tokens=self.max_new_tokens, stop=[END], **kwargs)
        out, self.last_stats = [], []
        for (_goal, obs, action), g in zip(batch, gens, strict=True):
            text = g.text.rstrip() + "\n" + END
            if self.memory is not None:
                text = self.memory.replace_page(obs, text, action)
            out.append(text)
            self.last_stats.append(
                {
                    "finish_reason": g.finish_reason,
                    "completion_tokens": g.completion_tokens,
                    "prompt_tokens": g.prompt_tokens,
                    **g.stats,
                }
            )
        return out

    def close(self) -> None:
        self.generator.close()


def read_memory(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_world_model(
    path: str | Path | None,
    *,
    page_memory: bool = True,
    llm_url: str | None = None,
    speculative: str | None = "strict",
    device: str = "cpu",
    threads: int | None = None,
    memory: str | Path | None = None,
    batch_size: int = 16,
    served_model: str | None = None,
) -> Any:
    """A world model from a folder (or an endpoint).

    Args:
        path: a ``lynn train world-model`` folder (any ``kind``: ``lm``, ``nearest``, ``memory``, ``copy``),
            or a local HF causal-LM folder, or (with ``llm_url``) the served model's name.
        page_memory: complement an LM with the page memory (figures are reported with and without).
        llm_url: an OpenAI-compatible endpoint (``http://HOST:PORT/v1``). With a ``lynn train world-model``
            folder as ``path``, its LM is the served model (``transformers serve FOLDER/lm``; the name is
            ``served_model`` or that folder's absolute path) and its memory, context, reply budget and
            tokenizer (to fit prompts) are used as in process; otherwise ``path`` is the served name.
        speculative: verification rule for the in-process LM (``None`` = plain ``generate``).
        memory: a ``memory.jsonl`` (training transitions) for retrieval/memory with a bare HF model.

    Raises:
        ValueError: no model at ``path`` (the message says how to train one).
    """
    from lynn.lm.backends import OpenAIGenerator, TransformersGenerator

    if llm_url:
        folder = Path(path) if path is not None and (Path(path) / CONFIG_FILE).exists() else None
        if folder is None:  # ``path`` is only the served model's name
            rows = read_memory(memory) if memory else []
            gen = OpenAIGenerator(base_url=llm_url, model=str(path or ""))
            return LMWorldModel(
                gen,
                NearestNeighbourModel(rows) if rows else None,
                PageMemory(rows) if rows and page_memory else None,
                batch_size=batch_size,
            )
        # A `lynn train world-model` folder whose LM is served (``transformers serve FOLDER/lm``): its
        # retrieval memory, context and reply budget, and its tokenizer to fit prompts, as in process.
        from transformers import AutoTokenizer

        from lynn.lm.tokenizer import encode_chat

        cfg = json.loads((folder / CONFIG_FILE).read_text())
        lm_dir = folder / cfg.get("lm", "lm")
        rows = (
            read_memory(memory or folder / MEMORY_FILE) if (memory or (folder / MEMORY_FILE).exists()) else []
        )
        tok = AutoTokenizer.from_pretrained(lm_dir)
        gen = OpenAIGenerator(base_url=llm_url, model=served_model or str(lm_dir.resolve()))
        return LMWorldModel(
            gen,
            NearestNeighbourModel(rows) if rows else None,
            PageMemory(rows) if rows and page_memory else None,
            context=int(cfg.get("context", 1024)),
            max_new_tokens=int(cfg.get("reply_tokens", REPLY_TOKENS)),
            batch_size=batch_size,
            count=lambda m: len(encode_chat(tok, m, add_generation_prompt=True)),
        )
    if path is None:
        raise ValueError(f"WebWorldModel needs model=PATH (a world-model folder); {TRAIN_HINT}")
    p = Path(path)
    cfg_path = p / CONFIG_FILE
    if cfg_path.exists():
        cfg = json.loads(cfg_path.read_text())
        rows = read_memory(p / MEMORY_FILE) if (p / MEMORY_FILE).exists() else []
        kind = cfg.get("kind", "lm")
        if kind == "copy":
            return CopyModel()
        if kind == "nearest":
            return NearestNeighbourModel(rows)
        if kind == "memory":
            return MemoryModel(rows)
        if kind != "lm":
            raise ValueError(f"{cfg_path}: unknown world-model kind {kind!r}")
        lm_dir = p / cfg.get("lm", "lm")
        if not (lm_dir / "config.json").exists():
            raise ValueError(f"no language model in {lm_dir} (config.json missing); {TRAIN_HINT}")
        gen = TransformersGenerator(
            lm_dir, device=device, speculative=speculative, drafter="prompt_lookup", threads=threads
        )
        return LMWorldModel(
            gen,
            NearestNeighbourModel(rows) if rows else None,
            PageMemory(rows) if page_memory and rows else None,
            context=int(cfg.get("context", 1024)),
            max_new_tokens=int(cfg.get("reply_tokens", REPLY_TOKENS)),
            batch_size=batch_size,
        )
    if (p / "config.json").exists():
        rows = read_memory(memory) if memory else []
        gen = TransformersGenerator(
            p, device=device, speculative=speculative, drafter="prompt_lookup", threads=threads
        )
        return LMWorldModel(
            gen,
            NearestNeighbourModel(rows) if rows else None,
            PageMemory(rows) if rows and page_memory else None,
            context=gen.context,
            batch_size=batch_size,
        )
    raise ValueError(f"no world model at {p} ({CONFIG_FILE} and config.json missing); {TRAIN_HINT}")
