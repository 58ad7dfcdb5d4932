"""``LMPolicy``: an LLM agent for the text envs (EVMQuest, LiveWeb, WebWorldModel).

Each step renders the observation with :func:`lynn.lm.prompts.render` (the same text the demonstrations
were written with), generates with a :mod:`lynn.lm.backends` generator, and parses the reply
(:mod:`lynn.agents.llm.parse`). ``act_batch`` serves a whole vector env in one batched generation.

From the command line::

    lynn eval Lynn/EVMQuest-v0 --split atomic --agent lm \\
        --agent-arg model='"models/lm"' --agent-arg speculative='"mars"' --agent-arg drafter='"prompt_lookup"'
    lynn eval Lynn/EVMQuest-v0 --agent lm --agent-arg llm_url='"http://127.0.0.1:8000/v1"' --agent-arg model='"NAME"'
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym

from lynn.agents import Agent
from lynn.agents.llm.parse import parse_evm_reply, parse_web_reply
from lynn.lm.prompts import WEB_REPLY_BUDGET

EVMQUEST = "Lynn/EVMQuest-v0"
WEB_IDS = ("Lynn/LiveWeb-v0", "Lynn/WebWorldModel-v0")
MAX_NEW = {EVMQUEST: 640, "web": WEB_REPLY_BUDGET}


#: Decoding defaults saved beside a model (``{"constraint": "copy_literals"}``): what its figures used.
DECODE_FILE = "lynn_decode.json"


class LMPolicy(Agent):
    """Acts by prompting a language model.

    Args:
        env: the env (its ``spec.id`` picks the renderer and parser); or pass ``env_id``.
        model: a local HF causal-LM folder (transformers/vLLM backends), a zoo name (``"zoo:evm-lm"``,
            :mod:`lynn.zoo`) or the endpoint's model name; default: the zoo's LM for the env.
        llm_url: an OpenAI-compatible endpoint (``http://HOST:PORT/v1``); selects the ``openai`` backend.
        backend: ``transformers`` (default), ``openai`` or ``vllm``.
        speculative: ``None``, ``strict``, ``mars`` or ``typical`` (transformers backend).
        drafter: ``prompt_lookup`` or ``draft``; ``draft``: the draft model folder or zoo name (default with
            ``drafter="draft"`` and the zoo's target: the zoo's draft for the env, ``zoo:evm-draft`` on EVMQuest).
        theta: MARS threshold; gamma: initial draft length.
        temperature: 0 = greedy; sampling draws from the agent's seed.
        max_new_tokens: reply budget (default 640 for EVMQuest scripts, 96 for web actions).
        context: the model's context in tokens (default: the ``lynn_train.json`` context of an in-repo
            model, else ``max_position_embeddings``); LiveWeb axtrees are cut to fit (see lynn.lm.prompts).
        style: EVMQuest prompt style, ``compact`` or ``full``.
        web_prompt: LiveWeb only: ``ranked`` (the compact ranked observation and a choice among the valid
            candidate actions by likelihood, :mod:`lynn.lm.web_candidates`; the default for a model folder
            with a ``lynn_web.json``) or ``cut`` (the old prompt: the page cut to the context, free generation;
            the default otherwise, so older models load as they were trained).
        constraint: ``"copy_hex"``: ``0x`` literals in a reply must be copied from the prompt
            (:mod:`lynn.lm.constraints`; transformers backend only), ``"copy_literals"`` (quoted numbers
            too), or ``"none"``. Default: the model folder's ``lynn_decode.json`` ``constraint`` (the decoding
            its card's figures were measured with), else none: a decoding aid for
            small models, reported beside the unconstrained figures.
        generator: an already built :class:`lynn.lm.backends.Generator` (shared between agents).
        env_id: the env id when ``env`` is not given (vector envs).
        slots: EVMQuest literal slots (:mod:`lynn.lm.slots`): the task line's addresses and amounts are shown
            as ``@A1``/``@N1`` and the reply's slot names are put back before the script is sent. Default: as
            the model was trained (``lynn train lm --slots`` records it in ``lynn_train.json``).
        history: EVMQuest: the prompt's ``Done:`` line of the episode's successful steps (:mod:`lynn.lm.prompts`);
            the policy keeps each row's own record (a step-0 observation starts a new one) and adds its last
            reply when the observation's ``last_result`` reports it mined or recorded. Default: as trained
            (``lynn train lm --history``).
        memory_weight: LiveWeb ranked models with an action memory: λ of the mixture with the memory
            (``0``: the LM alone, as DynaWeb's LM-alone proof starts from). Default: the model folder's.
    """

    name = "lm"

    def __init__(
        self,
        env: gym.Env | None = None,
        model: str | None = None,
        llm_url: str | None = None,
        backend: str | None = None,
        speculative: str | None = None,
        drafter: str = "prompt_lookup",
        draft: str | None = None,
        theta: float = 0.9,
        gamma: int = 5,
        temperature: float = 0.0,
        max_new_tokens: int | None = None,
        context: int | None = None,
        style: str = "compact",
        generator: Any = None,
        env_id: str | None = None,
        threads: int | None = None,
        constraint: str | None = None,
        web_prompt: str | None = None,
        slots: bool | None = None,
        history: bool | None = None,
        memory_weight: float | None = None,
    ) -> None:
        super().__init__(env)
        spec_id = env.spec.id if env is not None and env.spec is not None else None
        self.env_id = (env_id or spec_id or "").removeprefix("lynn:")
        if self.env_id != EVMQUEST and self.env_id not in WEB_IDS:
            raise ValueError(
                f"LMPolicy supports {EVMQUEST} and {', '.join(WEB_IDS)}, not {self.env_id or 'an env without an id'}"
            )
        from lynn import zoo

        zoo_env = EVMQUEST if self.env_id == EVMQUEST else WEB_IDS[0]
        if generator is None and model is None and llm_url is None and backend in (None, "transformers"):
            # No model given: the zoo's LM for this env (LiveWeb's for the imagined web too).
            model = zoo.default_for(zoo_env, "lm")
        if speculative and drafter == "draft" and draft is None and zoo.is_zoo_name(model):
            # The zoo's draft only beside the zoo's target for this env: it was distilled from it (one tokenizer).
            if any(
                c.name == model[len(zoo.PREFIX) :] and c.default_for.get(zoo_env) == "lm" for c in zoo.cards()
            ):
                draft = zoo.default_for(zoo_env, "draft")  # none shipped: ZooError says pass draft=PATH
        model, draft = zoo.resolve(model), zoo.resolve(draft)  # "zoo:NAME" -> its checked folder
        if constraint is None and model and (Path(model) / DECODE_FILE).exists():
            constraint = json.loads((Path(model) / DECODE_FILE).read_text()).get("constraint")
        if constraint == "none":
            constraint = None
        self.temperature = float(temperature)
        self.style = style
        self.max_new_tokens = max_new_tokens or MAX_NEW[EVMQUEST if self.env_id == EVMQUEST else "web"]
        if generator is None:
            from lynn.lm.backends import make_generator

            spec_kwargs = {"theta": theta, "gamma": gamma}
            kwargs: dict[str, Any] = {}
            chosen = backend or ("openai" if llm_url else "transformers")
            if constraint and chosen != "transformers":
                raise ValueError(f"constraint={constraint!r} needs the transformers backend, not {chosen}")
            if chosen == "transformers":
                kwargs = {
                    "constraint": constraint,
                    "speculative": speculative,
                    "drafter": drafter,
                    "draft": draft,
                    "spec_kwargs": spec_kwargs,
                    "threads": threads,
                }
            generator = make_generator(model=model, backend=backend, llm_url=llm_url, **kwargs)
        self.generator = generator
        self.context = context or self._context(model)
        self.chooser: Any = None
        self.web_prompt = self._web_prompt(web_prompt, model)
        if memory_weight is not None:
            if self.chooser is None:
                raise ValueError(
                    "memory_weight applies to LiveWeb ranked models (a folder with lynn_web.json)"
                )
            self.chooser.fmt.memory_weight = float(memory_weight)
            self.chooser.weights = None  # one λ everywhere, not a learned λ per state
        self.slots = self._trained_with("slots", slots, model)
        self.history = self._trained_with("history", history, model)
        self.done_steps: list[list[str]] = []  # per row: summaries of the episode's successful steps
        self.pending: list[str | None] = []  # per row: the summary of the reply sent last
        self.replies: list[list[str]] = []
        self.seed: int | None = None
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.last_generations: list[Any] = []

    def _context(self, model: str | None) -> int | None:
        if model and (Path(model) / "lynn_train.json").exists():
            return int(json.loads((Path(model) / "lynn_train.json").read_text())["context"])
        return getattr(self.generator, "context", None)

    def _trained_with(self, option: str, value: bool | None, model: str | None) -> bool:
        """An EVMQuest prompt option (``slots``, ``history``): on when asked, or when the model was trained with it."""
        if value is not None:
            return bool(value) and self.env_id == EVMQUEST
        summary = Path(model) / "lynn_train.json" if model else None
        if self.env_id != EVMQUEST or summary is None or not summary.exists():
            return False
        return bool(json.loads(summary.read_text()).get("config", {}).get(option))

    def _web_prompt(self, web_prompt: str | None, model: str | None) -> str | None:
        if self.env_id not in WEB_IDS:
            return None
        fmt_file = Path(model) / "lynn_web.json" if model else None
        has = fmt_file is not None and fmt_file.exists()
        choice = web_prompt or ("ranked" if has else "cut")
        if choice not in ("ranked", "cut"):
            raise ValueError(f"web_prompt must be 'ranked' or 'cut', got {web_prompt!r}")
        if choice == "ranked":
            if not has:
                raise ValueError(
                    f"web_prompt='ranked' needs a model folder with lynn_web.json (got {model!r})"
                )
            from lynn.lm.web_candidates import RankedChooser

            self.chooser = RankedChooser.from_folder(
                self.generator.model, self.generator.tokenizer, fmt_file.parent
            )
        return choice

    def reset(self, seed: int | None = None) -> None:
        self.seed = seed
        self.replies = []
        self.done_steps, self.pending = [], []

    def _history(self, row: int, obs: dict[str, Any]) -> list[str]:
        """Row ``row``'s ``Done:`` list for ``obs``, after counting its last reply if ``obs`` reports it succeeded."""
        from lynn.lm.prompts import evm_step_succeeded

        while len(self.done_steps) <= row:
            self.done_steps.append([])
            self.pending.append(None)
        if int(obs.get("step", 0)) == 0:
            self.done_steps[row], self.pending[row] = [], None
        elif self.pending[row] is not None and evm_step_succeeded(obs.get("last_result", "")):
            self.done_steps[row].append(self.pending[row])
        self.pending[row] = None
        return list(self.done_steps[row])

    def messages(self, obs: dict[str, Any], history: list[str] | None = None) -> list[dict[str, str]]:
        """The chat this policy sends for ``obs`` (LiveWeb pages cut to the context; ``history``: EVMQuest's
        ``Done:`` list for a model trained with it)."""
        from lynn.lm.prompts import render

        fits = None
        count = getattr(self.generator, "count_tokens", None)
        if self.env_id in WEB_IDS and self.context and count is not None:
            budget = self.context - self.max_new_tokens

            def fits(msgs: list[dict[str, str]]) -> bool:
                return count(msgs) <= budget

        return render(self.env_id, obs, style=self.style, fits=fits, history=history)

    def parse(self, text: str) -> str:
        return parse_evm_reply(text) if self.env_id == EVMQUEST else parse_web_reply(text)

    def act(self, obs: Any, info: dict[str, Any]) -> str:
        return self.act_batch([obs], [info])[0]

    def act_batch(self, obs_list: list[Any], infos: list[dict[str, Any]] | None = None) -> list[str]:
        """Actions for several observations in one batched generation (a vector env's rows)."""
        if self.chooser is not None:
            return self._choose_batch(obs_list)
        if self.history:
            prompts = [self.messages(o, self._history(i, o)) for i, o in enumerate(obs_list)]
        else:
            prompts = [self.messages(o) for o in obs_list]
        maps: list[dict[str, str]] = [{} for _ in prompts]
        if self.slots:
            from lynn.lm.slots import mask_messages

            prompts, maps = (list(x) for x in zip(*(mask_messages(p) for p in prompts), strict=True))
        seed = None if self.seed is None else (self.seed + self.calls) % (2**31)
        self.calls += 1
        gens = self.generator.generate(
            prompts, max_new_tokens=self.max_new_tokens, temperature=self.temperature, seed=seed
        )
        self.last_generations = gens
        for g in gens:
            self.prompt_tokens += g.prompt_tokens
            self.completion_tokens += g.completion_tokens
        texts = [g.text for g in gens]
        if self.slots:
            from lynn.lm.slots import unmask

            texts = [unmask(t, m) for t, m in zip(texts, maps, strict=True)]
        actions = [self.parse(t) for t in texts]
        if self.history:
            from lynn.lm.prompts import evm_action_summary

            self.pending = [evm_action_summary(a) for a in actions]
        return actions

    def _choose_batch(self, obs_list: list[Any]) -> list[str]:
        """Ranked format: each row's action chosen among its page's valid candidates (one row's history each;
        a row whose observation has no last action starts a new episode)."""
        import random

        from lynn.lm.backends import Generation

        while len(self.replies) < len(obs_list):
            self.replies.append([])
        # temperature > 0 samples each row's candidate (RL rollouts); the stream continues from the seed
        rng = random.Random(None if self.seed is None else (self.seed + self.calls) % (2**31))
        out, gens = [], []
        for i, obs in enumerate(obs_list):
            if not obs.get("last_action"):
                self.replies[i] = []
            c = self.chooser.decide(obs, self.replies[i], self.temperature, rng)
            self.replies[i].append(c.reply)
            self.prompt_tokens += self.chooser.last_prompt_tokens
            self.completion_tokens += 1
            out.append(c.action)
            gens.append(Generation(c.reply, self.chooser.last_prompt_tokens, 1, stats={"choice": c}))
        self.last_generations = gens
        self.calls += 1
        return out

    def close(self) -> None:
        self.generator.close()
