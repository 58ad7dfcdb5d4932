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

**``correct`` mode** (``lynn train world-model --mode correct``; retrieval-augmented, cheap to learn): the
prompt (:func:`correction_prompt`) carries the nearest neighbour's Δ *transferred* to the step (the strong
retrieval of :class:`~lynn.envs.worldmodel.baselines.NearestNeighbourModel`) and, instead of the whole
page, only the page lines within :data:`NEAR_LINES` of the acted-on element (``Lines: I-J`` says which).
The reply is a Δ over the page that guess gives (:func:`correction_text`): only the fields that differ
from the guess, hunks for the lines the guess got wrong, an empty correction when it is right — the model
learns to copy the retrieved Δ and correct it, and writes few tokens. :func:`apply_correction` turns the
reply back into a Δ of o_t; a reply that is not a valid Δ falls back to the guess (``last_errors``, which
the env reports in ``info["error"]``).

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
from lynn.envs.worldmodel.delta import (
    EDITS,
    END,
    HEADER,
    Delta,
    action_target,
    apply_delta,
    apply_delta_text,
    compute_delta,
    page_frame,
    relative_url,
    strip_frame,
    summarize,
)

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
    user = _step_header(goal, obs, action, similar) + f"Page:\n{page}"
    return [{"role": "system", "content": WM_SYSTEM}, {"role": "user", "content": user}]


def _step_header(goal: str, obs: dict[str, Any], action: str, similar: str | None) -> str:
    """The lines every world-model prompt starts with: goal, URL, title, action, its element, the
    retrieved neighbour's Δ."""
    ax = str(obs.get("axtree", ""))
    bid = action_target(action)
    target, link = element_block(ax, bid) if bid else ("", "")
    element = (target or "none") + (f" (/url: {link})" if link else "")
    return (
        f"Goal: {goal}\n"
        f"URL: {relative_url(str(obs.get('url', '')), str(obs.get('url', '')))}\n"
        f"Title: {obs.get('title', '')}\n"
        f"Action: {action}\n"
        f"Element: {element}\n"
        f"Similar:\n{(similar or 'none')[:SIMILAR_CHARS]}\n"
    )


#: Prompt/reply modes of an LM world model: ``full`` (the reply is the whole Δ of o_t) and ``correct``
#: (the reply corrects the retrieved, transferred Δ; :func:`correction_prompt`).
MODES = ("full", "correct")
#: Lines of the page either side of the acted-on element in a ``correct`` prompt.
NEAR_LINES = 8
#: The correction that keeps the guess as it is.
EMPTY_CORRECTION = f"{HEADER}\n{EDITS}\n{END}"
CORRECT_SYSTEM = (
    "You are a model of a website. The Similar state change is a guess for this step, transferred from a "
    "similar training step. Write the correction: a state change over the page the guess gives, with "
    "only the fields that differ, hunks '@@ INDEX -COUNT = ANCHOR' and '+' lines, then [End]."
)


def near_lines(obs: dict[str, Any], action: str, radius: int = NEAR_LINES) -> tuple[int, list[str]]:
    """(index of the first line, the lines) of the page (id prefix removed) within ``radius`` lines of the
    acted-on element; the page's first ``2 * radius + 1`` lines when the action names no element on it."""
    ax = str(obs.get("axtree", ""))
    lines = strip_frame(ax, page_frame(ax)).split("\n")
    bid = action_target(action)
    at = None
    if bid:
        tag = f"[{strip_frame(f'[{bid}]', page_frame(f'[{bid}]'))[1:-1]}] "
        at = next((i for i, x in enumerate(lines) if x.lstrip().startswith(tag)), None)
    lo = max(0, (at if at is not None else radius) - radius)
    return lo, lines[lo : lo + 2 * radius + 1]


def correction_prompt(
    goal: str, obs: dict[str, Any], action: str, similar: str | None, radius: int = NEAR_LINES
) -> list[dict[str, str]]:
    """The chat messages of a ``correct``-mode world model for one step: the step's header lines as in
    :func:`world_prompt`, the retrieved Δ *transferred* to this step
    (:meth:`~lynn.envs.worldmodel.baselines.NearestNeighbourModel.transferred`), and — the documented cut of
    o_t — only the page lines within ``radius`` of the acted-on element (``Lines: I-J`` gives their
    indices), not the whole page."""
    lo, near = near_lines(obs, action, radius)
    user = (
        _step_header(goal, obs, action, similar)
        + f"Lines: {lo}-{lo + len(near) - 1}\n"
        + "Page:\n"
        + "\n".join(near)
    )
    return [{"role": "system", "content": CORRECT_SYSTEM}, {"role": "user", "content": user}]


def correction_text(
    obs: dict[str, Any], guess_obs: dict[str, Any], action: str, next_obs: dict[str, Any], guess: Delta
) -> str:
    """The training target of a ``correct``-mode model: the Δ from the guessed page ``guess_obs``
    (``guess`` applied to o_t = ``obs``) to the real next page, with only the fields that differ from the
    guess (URL, Title, Frame; the real transition's summary when it differs from the guess's) — an empty
    correction when the guess is right."""
    c = compute_delta(guess_obs, action, next_obs)
    c.summary = summarize(obs, action, next_obs)
    out = [HEADER]
    if str(next_obs.get("url", "")) != str(guess_obs.get("url", "")):
        out.append(f"URL: {c.url}")
    if str(next_obs.get("title", "")) != str(guess_obs.get("title", "")):
        out.append(f"Title: {c.title}")
    if c.frame != page_frame(str(guess_obs.get("axtree", ""))):
        out.append(f"Frame: {c.frame or '-'}")
    if c.summary != guess.summary:
        out.append(f"Summary: {c.summary}")
    out.append(EDITS)
    for h in c.hunks:
        out.append(f"@@ {h.start} -{h.count}" + (f" = {h.anchor}" if h.anchor is not None else ""))
        out += ["+" + line for line in h.added]
    out.append(END)
    return "\n".join(out)


def apply_correction(obs: dict[str, Any], action: str, guess: Delta, reply: str) -> tuple[str, str | None]:
    """The Δ of o_t that a ``correct``-mode reply means: ``guess`` applied to o_t, then the reply applied
    to that page; returns (Δ text, error or None). Fallback: a reply that is not a valid Δ leaves the
    guess (the nearest neighbour's prediction) and reports why."""
    guess_obs, skipped = apply_delta(obs, guess, action)
    final, err, c = apply_delta_text(guess_obs, reply, action)
    rel_obs = dict(obs, url=relative_url(str(obs.get("url", "")), str(obs.get("url", ""))))
    nxt = dict(final, url=relative_url(str(final.get("url", "")), str(obs.get("url", ""))))
    d = compute_delta(rel_obs, action, nxt)
    d.summary = (c.summary if c is not None and c.summary else "") or guess.summary
    for h in d.hunks:
        h.removed = None
    if err and c is None:
        err = f"world model correction is not a valid Δ; the retrieved guess is used ({err})"
    if skipped:  # hunks of the retrieved guess that did not land on this page (as the NN reports them)
        err = "; ".join([*(f"retrieved guess: {p}" for p in skipped), *([err] if err else [])])
    return d.to_text(), err


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
        mode: str = "full",
        margin: float | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if mode == "correct" and nn is None:
            raise ValueError("a correct-mode world model needs its retrieval memory (memory.jsonl)")
        self.mode = mode
        #: ``correct`` mode with an in-process LM: keep a non-empty correction only when the LM gives it
        #: ``margin`` nats more log-probability than the empty one (the guess as it is); ``None``: always.
        self.margin = margin
        #: Per item of the last batch: log P(reply) - log P(empty reply), when the margin was checked.
        self.last_margins: list[float | None] = []
        self.last_errors: list[str | None] = []
        #: The raw replies of the last batch (``correct`` mode: the corrections, before composing).
        self.last_replies: list[str] = []
        self.generator = generator
        self.count = count
        self.nn = nn
        self.memory = memory
        self.context = int(context)
        self.max_new_tokens = int(max_new_tokens)
        self.batch_size = int(batch_size)
        self.last_stats: list[dict[str, Any]] = []

    def guesses(self, batch: Sequence[Item]) -> list[Delta | None]:
        """The retrieved Δ per item (``correct`` mode: transferred to the step; else :meth:`adapted`)."""
        if self.nn is None:
            return [None] * len(batch)
        out: list[Delta | None] = []
        for goal, obs, action in batch:
            row = self.nn.neighbour(goal, obs, action)
            if self.mode == "correct":
                out.append(self.nn.transferred(goal, obs, action, row))
            else:
                out.append(self.nn.adapted(obs, row))
        return out

    def prompts(
        self, batch: Sequence[Item], guesses: Sequence[Delta | None] | None = None
    ) -> list[list[dict[str, str]]]:
        out = []
        count = getattr(self.generator, "count_tokens", None) or self.count
        guesses = self.guesses(batch) if guesses is None else guesses
        for (goal, obs, action), g in zip(batch, guesses, strict=True):
            similar = g.to_text() if g is not None else None
            if self.mode == "correct":
                msgs = correction_prompt(goal, obs, action, similar)
            else:
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
        guesses = self.guesses(batch)
        prompts = self.prompts(batch, guesses)
        kwargs: dict[str, Any] = {}
        # In-process transformers: batch as asked. (An endpoint generator has a `model` too — the served
        # name — but no batch size: it sends the prompts concurrently.)
        if "batch_size" in inspect.signature(self.generator.generate).parameters:
            kwargs["batch_size"] = self.batch_size
        gens = self.generator.generate(prompts, max_new_tokens=self.max_new_tokens, stop=[END], **kwargs)
        out, self.last_stats, self.last_errors, self.last_margins = [], [], [], []
        self.last_replies = [g.text for g in gens]
        texts = [g.text.rstrip() + "\n" + END for g in gens]
        gaps: list[float | None] = [None] * len(texts)
        if self.mode == "correct" and self.margin is not None:
            ask = [i for i, t in enumerate(texts) if t.strip() != EMPTY_CORRECTION]
            for i, gap in zip(ask, self.reply_gaps([(prompts[i], texts[i]) for i in ask]), strict=True):
                gaps[i] = gap
        for text, gap, (_goal, obs, action), g, guess in zip(texts, gaps, batch, gens, guesses, strict=True):
            err = None
            if gap is not None and self.margin is not None and gap < self.margin:
                text = EMPTY_CORRECTION
            self.last_margins.append(gap)
            if self.mode == "correct" and guess is not None:
                text, err = apply_correction(obs, action, guess, text)
            self.last_errors.append(err)
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

    def reply_gap(self, messages: list[dict[str, str]], reply: str) -> float | None:
        """log P(``reply``) - log P(the empty correction) under the LM given ``messages`` (teacher forcing);
        ``None`` when the generator is not an in-process transformers model."""
        return self.reply_gaps([(messages, reply)])[0]

    def reply_gaps(
        self, pairs: Sequence[tuple[list[dict[str, str]], str]], chunk: int = 32
    ) -> list[float | None]:
        """:meth:`reply_gap` of many (messages, reply) pairs, scored in padded batches of ``chunk``
        sequences (the reply and the empty correction of each pair)."""
        model, tok = getattr(self.generator, "model", None), getattr(self.generator, "tokenizer", None)
        if not pairs:
            return []
        if model is None or tok is None:
            return [None] * len(pairs)
        import torch

        from lynn.lm.tokenizer import encode_chat

        seqs: list[tuple[list[int], int]] = []  # (ids, prompt length) per scored sequence
        for messages, reply in pairs:
            n = len(encode_chat(tok, messages, add_generation_prompt=True))
            for text in (reply, EMPTY_CORRECTION):
                msgs = [*messages, {"role": "assistant", "content": text}]
                seqs.append((encode_chat(tok, msgs, add_generation_prompt=False), n))
        pad = tok.pad_token_id if tok.pad_token_id is not None else 0
        scores: list[float] = []
        for k in range(0, len(seqs), chunk):
            part = seqs[k : k + chunk]
            width = max(len(ids) for ids, _ in part)
            x = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in part], device=model.device)
            mask = torch.tensor(
                [[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in part], device=model.device
            )
            with torch.no_grad():
                lp = torch.log_softmax(model(input_ids=x, attention_mask=mask).logits[:, :-1].float(), -1)
            for row, (ids, n) in enumerate(part):
                if len(ids) <= n:
                    scores.append(float("nan"))
                    continue
                pos = torch.arange(n - 1, len(ids) - 1, device=model.device)
                scores.append(float(lp[row, pos, x[row, n : len(ids)]].sum()))
        out: list[float | None] = []
        for i in range(len(pairs)):
            gap = scores[2 * i] - scores[2 * i + 1]
            out.append(None if gap != gap else gap)
        return out

    def close(self) -> None:
        self.generator.close()


def stored(path: str | Path) -> Path:
    """``path``, or ``path.gz`` where only the gzip-compressed copy exists (the zoo ships its JSONL so)."""
    p = Path(path)
    gz = p.with_name(p.name + ".gz")
    return gz if not p.exists() and gz.exists() else p


def open_text(path: str | Path) -> Any:
    """A text file, read through gzip when its name ends in ``.gz``."""
    import gzip

    p = stored(path)
    return gzip.open(p, "rt", encoding="utf-8") if p.name.endswith(".gz") else p.open(encoding="utf-8")


def read_memory(path: str | Path) -> list[dict[str, Any]]:
    with open_text(path) as fh:
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
    margin: float | str | None = "config",
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
        memory: a ``memory.jsonl`` (training transitions) for retrieval/memory with a bare HF model, or in
            place of a folder's own ``memory.jsonl`` (e.g. a dev split's rows).
        margin: a ``correct``-mode LM's acceptance margin (:attr:`LMWorldModel.margin`); ``"config"``:
            the folder's ``worldmodel.json`` ``margin`` (absent: every correction is kept).

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
            read_memory(memory or folder / MEMORY_FILE)
            if (memory or stored(folder / MEMORY_FILE).exists())
            else []
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
            mode=str(cfg.get("mode", "full")),
        )
    if path is None:
        raise ValueError(f"WebWorldModel needs model=PATH (a world-model folder); {TRAIN_HINT}")
    p = Path(path)
    cfg_path = p / CONFIG_FILE
    if cfg_path.exists():
        cfg = json.loads(cfg_path.read_text())
        rows = read_memory(p / MEMORY_FILE) if stored(p / MEMORY_FILE).exists() else []
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
        if memory:
            rows = read_memory(memory)
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
            mode=str(cfg.get("mode", "full")),
            margin=cfg.get("margin") if margin == "config" else margin,
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
