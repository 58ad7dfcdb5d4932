"""One :class:`Generator` interface over three ways of running a model.

- :class:`TransformersGenerator` — a local Hugging Face causal LM in-process (CPU or GPU), batched with
  left padding; optionally with our speculative decoding (:mod:`lynn.lm.speculative`).
- :class:`OpenAIGenerator` — any OpenAI-compatible endpoint (``transformers serve``, vLLM's server,
  a provider) through the ``openai`` client; a batch is sent as concurrent requests.
- :class:`VLLMGenerator` — vLLM's offline engine (optional extra, GPU only).

A prompt is either a list of chat messages (rendered with the model's chat template) or a plain string
(used as is). Every backend returns one :class:`Generation` per prompt with the text and token counts,
so agents and benchmarks account for cost the same way whichever backend runs.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

Prompt = str | list[dict[str, str]]


@dataclass
class Generation:
    """One completion: its text (cut before any stop string), token counts and why it ended."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str = "stop"  # "stop" (EOS or a stop string) or "length"
    stats: dict[str, Any] = field(default_factory=dict)


def cut_at_stop(text: str, stop: Sequence[str] | None) -> tuple[str, bool]:
    """``text`` up to the earliest stop string, and whether one was found."""
    best = None
    for s in stop or ():
        i = text.find(s)
        if s and i >= 0 and (best is None or i < best):
            best = i
    return (text, False) if best is None else (text[:best], True)


class Generator(abc.ABC):
    """Generates completions for a batch of prompts."""

    name: str = "generator"

    @abc.abstractmethod
    def generate(
        self,
        prompts: Sequence[Prompt],
        max_new_tokens: int = 256,
        stop: Sequence[str] | None = None,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> list[Generation]:
        """One :class:`Generation` per prompt, in order (temperature 0 = greedy)."""

    def close(self) -> None:  # noqa: B027  (optional: backends holding processes or engines override it)
        """Release what the backend holds."""


def encode_prompt(tokenizer: Any, prompt: Prompt) -> list[int]:
    """Token ids of a prompt: a string as-is, chat messages through the chat template plus the reply
    header (what every transformers-side generator and learner of the project feeds a model)."""
    if isinstance(prompt, str):
        return list(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    from lynn.lm.tokenizer import encode_chat

    return encode_chat(tokenizer, prompt, add_generation_prompt=True)


def eos_token_ids(tokenizer: Any, model: Any) -> list[int]:
    """Every id that ends a reply: the tokenizer's EOS and the model's generation-config EOS (int or list)."""
    ids: set[int] = set()
    for tid in (tokenizer.eos_token_id, getattr(model.generation_config, "eos_token_id", None)):
        if isinstance(tid, int):
            ids.add(tid)
        elif isinstance(tid, list):
            ids.update(t for t in tid if isinstance(t, int))
    return sorted(ids)


def set_threads(threads: int | None) -> None:
    """Torch intra-op threads (``LYNN_TORCH_THREADS`` when ``threads`` is None). On a loaded 2-core
    machine one thread is several times faster than two (measured: 0.33 s vs 1.2 s a training step)."""
    import torch

    n = threads or int(os.environ.get("LYNN_TORCH_THREADS", "0") or 0)
    if n > 0:
        torch.set_num_threads(n)


class TransformersGenerator(Generator):
    """A local causal LM (any ``from_pretrained`` folder) in this process.

    Args:
        model: folder of a saved model (with its tokenizer), or an already loaded model.
        tokenizer: the tokenizer when ``model`` is an object.
        device: ``cpu`` (default) or ``cuda``.
        speculative: ``None`` (plain ``generate``), or a verification rule for our speculative decoding:
            ``strict`` (lossless), ``mars`` or ``typical``.
        drafter: ``prompt_lookup`` (n-gram copy from the prompt) or ``draft`` (a draft model).
        draft: folder of the draft model (``drafter="draft"``); must share the tokenizer.
        spec_kwargs: :class:`lynn.lm.speculative.SpecConfig` fields (``gamma``, ``theta``, ...).
        threads: torch threads (see :func:`set_threads`).
        constraint: ``None`` or ``"copy_hex"`` (:class:`lynn.lm.constraints.HexCopyConstraint`: ``0x``
            literals in a reply are copied from its prompt) or ``"copy_literals"``
            (:class:`~lynn.lm.constraints.LiteralCopyConstraint`: quoted numbers too), on the plain and the
            speculative path.
    """

    name = "transformers"

    def __init__(
        self,
        model: str | Path | Any,
        tokenizer: Any = None,
        device: str = "cpu",
        speculative: str | None = None,
        drafter: str = "prompt_lookup",
        draft: str | Path | Any | None = None,
        spec_kwargs: dict[str, Any] | None = None,
        threads: int | None = None,
        constraint: str | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        set_threads(threads)
        if isinstance(model, str | Path):
            path = Path(model)
            if not (path / "config.json").exists():
                raise FileNotFoundError(
                    f"no model at {path} (config.json missing); train one with `lynn train lm --data DIR --out {path}`"
                )
            self.model = AutoModelForCausalLM.from_pretrained(path)
            self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(path)
            self.path = str(path)
        else:
            if tokenizer is None:
                raise ValueError("pass the tokenizer with a model object")
            self.model, self.tokenizer, self.path = model, tokenizer, getattr(model, "name_or_path", "")
        # transformers types PreTrainedModel.to through a decorator that loses ``self``: the stub is wrong.
        self.model.to(device).eval()  # type: ignore[arg-type]
        self.device = device
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "left"
        self.torch = torch
        from lynn.lm.speculative import RULES

        if speculative is not None and speculative not in RULES:
            raise ValueError(f"speculative must be None or one of {RULES}, got {speculative!r}")
        if drafter not in ("prompt_lookup", "draft"):
            raise ValueError(f"drafter must be 'prompt_lookup' or 'draft', got {drafter!r}")
        self.speculative = speculative
        self.drafter_name = drafter
        self.spec_kwargs = dict(spec_kwargs or {})
        self.draft_model = None
        if speculative and drafter == "draft":
            if draft is None:
                raise ValueError(
                    "drafter='draft' needs draft=PATH (train one with `lynn train lm --role draft`)"
                )
            if isinstance(draft, str | Path):
                self.draft_model = AutoModelForCausalLM.from_pretrained(draft).to(device).eval()  # type: ignore[arg-type]  # as above
            else:
                self.draft_model = draft
            if self.draft_model.config.vocab_size != self.model.config.vocab_size:
                raise ValueError("the draft model must share the target's vocabulary")
        self.eos_ids = eos_token_ids(self.tokenizer, self.model)
        self.context = int(getattr(self.model.config, "max_position_embeddings", 2048))
        if constraint not in (None, "copy_hex", "copy_literals"):
            raise ValueError(f"constraint must be None, 'copy_hex' or 'copy_literals', got {constraint!r}")
        self.constraint = None
        if constraint is not None:
            from lynn.lm.constraints import HexCopyConstraint, LiteralCopyConstraint

            kind = HexCopyConstraint if constraint == "copy_hex" else LiteralCopyConstraint
            self.constraint = kind(self.tokenizer)

    def encode(self, prompt: Prompt) -> list[int]:
        """Token ids of a prompt (chat messages through the chat template, plus the reply header)."""
        return encode_prompt(self.tokenizer, prompt)

    def count_tokens(self, prompt: Prompt) -> int:
        return len(self.encode(prompt))

    def _drafter(self) -> Any:
        from lynn.lm import speculative as sd

        if self.drafter_name == "draft":
            if self.draft_model is None:
                raise ValueError("drafter='draft' needs a draft model (draft=PATH)")
            return sd.DraftModelDrafter(self.draft_model)
        return sd.PromptLookupDrafter()

    def generate(
        self,
        prompts: Sequence[Prompt],
        max_new_tokens: int = 256,
        stop: Sequence[str] | None = None,
        temperature: float = 0.0,
        seed: int | None = None,
        batch_size: int = 8,
        progress: bool = False,
    ) -> list[Generation]:
        ids = [self.encode(p) for p in prompts]
        out: list[Generation] = []
        starts = range(0, len(ids), batch_size)
        chunks: Iterable[int] = starts
        if progress:
            from rich.progress import track

            chunks = track(starts, description="generating", total=len(starts))
        for start in chunks:
            batch = ids[start : start + batch_size]
            if self.speculative:
                new, stats = self._speculative(batch, max_new_tokens, temperature, seed)
            else:
                new, stats = self._plain(batch, max_new_tokens, temperature, seed), {}
            for prompt_ids, toks in zip(batch, new, strict=True):
                toks = list(toks)
                hit_eos = False
                for j, t in enumerate(toks):
                    if t in self.eos_ids:
                        toks, hit_eos = toks[:j], True
                        break
                decoded = self.tokenizer.decode(toks, skip_special_tokens=True)
                assert isinstance(decoded, str)  # one sequence decodes to one string
                text, hit_stop = cut_at_stop(decoded, stop)
                finish = "stop" if (hit_eos or hit_stop) else "length"
                out.append(Generation(text, len(prompt_ids), len(toks) + hit_eos, finish, stats))
        return out

    def _plain(
        self, batch: list[list[int]], max_new_tokens: int, temperature: float, seed: int | None
    ) -> list[list[int]]:
        torch = self.torch
        n = max(len(b) for b in batch)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.tensor([[pad] * (n - len(b)) + b for b in batch], device=self.device)
        mask = torch.tensor([[0] * (n - len(b)) + [1] * len(b) for b in batch], device=self.device)
        kwargs: dict[str, Any] = {"do_sample": temperature > 0}
        if temperature > 0:
            kwargs.update(temperature=temperature, top_k=0, top_p=1.0)
            if seed is not None:
                torch.manual_seed(seed)
        else:
            kwargs.update(temperature=None, top_k=None, top_p=None)
        if self.constraint is not None:
            from transformers import LogitsProcessorList

            kwargs["logits_processor"] = LogitsProcessorList([self.constraint.logits_processor(batch, n)])
        with torch.no_grad():
            seq = self.model.generate(
                input_ids=input_ids,
                attention_mask=mask,
                max_new_tokens=max_new_tokens,
                eos_token_id=self.eos_ids or None,
                pad_token_id=pad,
                **kwargs,
            )
        return [row[n:].tolist() for row in seq]

    def _speculative(
        self, batch: list[list[int]], max_new_tokens: int, temperature: float, seed: int | None
    ) -> tuple[list[list[int]], dict[str, Any]]:
        from lynn.lm import speculative as sd

        assert self.speculative is not None  # generate() calls this only with a rule
        cfg = sd.SpecConfig(rule=self.speculative, **self.spec_kwargs)
        new, stats = sd.speculative_generate(
            self.model,
            batch,
            self._drafter(),
            max_new_tokens=max_new_tokens,
            eos_token_id=self.eos_ids or None,
            temperature=temperature,
            seed=seed,
            config=cfg,
            pad_token_id=self.tokenizer.pad_token_id,
            constraint=self.constraint,
        )
        return new, {
            "target_forwards": stats.target_forwards,
            "mean_accepted": stats.mean_accepted(),
            "new_tokens": stats.new_tokens,
        }


class OpenAIGenerator(Generator):
    """Any OpenAI-compatible endpoint (``/v1/chat/completions`` for messages, ``/v1/completions`` for text).

    Args:
        base_url: e.g. ``http://127.0.0.1:8000/v1``.
        model: the model name the server knows (``transformers serve`` uses the model folder's path).
        api_key: sent as a bearer token (default ``OPENAI_API_KEY`` or ``EMPTY``).
        concurrency: requests in flight for a batch.
        timeout: seconds per request.
    """

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        concurrency: int = 8,
        timeout: float = 120.0,
    ) -> None:
        from openai import OpenAI

        self.client = OpenAI(
            base_url=base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
            timeout=timeout,
            max_retries=1,
        )
        self.model = model
        self.concurrency = max(1, concurrency)

    def _one(
        self,
        prompt: Prompt,
        max_new_tokens: int,
        stop: Sequence[str] | None,
        temperature: float,
        seed: int | None,
    ) -> Generation:
        common: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_new_tokens,
            "temperature": temperature,
        }
        if seed is not None:
            common["seed"] = seed
        if isinstance(prompt, str):
            r = self.client.completions.create(prompt=prompt, **common)
            text, finish = r.choices[0].text or "", r.choices[0].finish_reason or "stop"
        else:
            # Our chat messages are plain {"role", "content"} dicts, which openai's message TypedDicts describe.
            messages = cast("list[ChatCompletionMessageParam]", list(prompt))
            r = self.client.chat.completions.create(messages=messages, **common)
            text, finish = r.choices[0].message.content or "", r.choices[0].finish_reason or "stop"
        text, hit = cut_at_stop(text, stop)  # client-side: not every server honours `stop`
        usage = getattr(r, "usage", None)
        return Generation(
            text,
            int(getattr(usage, "prompt_tokens", 0) or 0),
            int(getattr(usage, "completion_tokens", 0) or 0),
            "stop" if hit else ("length" if finish == "length" else "stop"),
        )

    def generate(
        self,
        prompts: Sequence[Prompt],
        max_new_tokens: int = 256,
        stop: Sequence[str] | None = None,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> list[Generation]:
        if len(prompts) == 1:
            return [self._one(prompts[0], max_new_tokens, stop, temperature, seed)]
        with ThreadPoolExecutor(self.concurrency) as pool:
            return list(pool.map(lambda p: self._one(p, max_new_tokens, stop, temperature, seed), prompts))


class VLLMGenerator(Generator):
    """vLLM's offline engine over a local model folder (``pip install 'lynn-gym[vllm]'``; GPU only).

    Args:
        model: local model folder.
        **engine_kwargs: passed to ``vllm.LLM`` (e.g. ``gpu_memory_utilization``, ``speculative_config``).
    """

    name = "vllm"

    def __init__(self, model: str | Path, **engine_kwargs: Any) -> None:
        try:
            from vllm import LLM
        except ImportError as exc:
            raise ImportError(
                "the vllm backend needs vLLM on a GPU machine: pip install 'lynn-gym[vllm]'"
            ) from exc
        self.llm = LLM(model=str(model), **engine_kwargs)
        self.tokenizer = self.llm.get_tokenizer()

    def generate(
        self,
        prompts: Sequence[Prompt],
        max_new_tokens: int = 256,
        stop: Sequence[str] | None = None,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> list[Generation]:
        from vllm import SamplingParams

        params = SamplingParams(
            max_tokens=max_new_tokens, temperature=temperature, seed=seed, stop=list(stop or []) or None
        )
        texts = [
            p
            if isinstance(p, str)
            else self.tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True)
            for p in prompts
        ]
        outs = self.llm.generate(texts, params, use_tqdm=False)
        return [
            Generation(
                o.outputs[0].text,
                len(o.prompt_token_ids or []),
                len(o.outputs[0].token_ids),
                "length" if o.outputs[0].finish_reason == "length" else "stop",
            )
            for o in outs
        ]


def make_generator(
    model: str | None = None,
    backend: str | None = None,
    llm_url: str | None = None,
    **kwargs: Any,
) -> Generator:
    """The backend a user asked for: ``llm_url`` -> :class:`OpenAIGenerator`; ``backend="vllm"`` ->
    :class:`VLLMGenerator`; otherwise :class:`TransformersGenerator` over ``model``."""
    backend = backend or ("openai" if llm_url else "transformers")
    if backend == "openai":
        if not llm_url or not model:
            raise ValueError("the openai backend needs llm_url='http://HOST:PORT/v1' and model=NAME")
        return OpenAIGenerator(
            llm_url, model, **{k: v for k, v in kwargs.items() if k in ("api_key", "concurrency", "timeout")}
        )
    if not model:
        raise ValueError("pass model=PATH (a local HF causal-LM folder, e.g. from `lynn train lm`)")
    if backend == "vllm":
        return VLLMGenerator(model, **kwargs.get("engine_kwargs", {}))
    if backend != "transformers":
        raise ValueError(f"unknown backend {backend!r}; choose transformers, openai or vllm")
    return TransformersGenerator(model, **{k: v for k, v in kwargs.items() if k != "engine_kwargs"})
