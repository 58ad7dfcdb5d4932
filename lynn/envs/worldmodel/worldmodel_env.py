"""``Lynn/WebWorldModel-v0``: the LiveWeb tasks, stepped by a learned world model instead of a browser."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from lynn.envs.liveweb.actions import STOP_ACTIONS, ActionError, parse_actions
from lynn.envs.spaces import UnicodeText
from lynn.envs.worldmodel.delta import apply_delta_text

ENV_ID = "Lynn/WebWorldModel-v0"
REWARD_SOURCES = ("model", "checks")
# LiveWeb's checks that read only what an imagined episode ends with: the answer and the final URL.
CHECKS_ON_DREAM = frozenset({"string_match", "url_match"})
OBS_KEYS = ("goal", "url", "title", "axtree", "open_pages", "last_action", "last_action_error")


class WebWorldModelEnv(gym.Env):
    """
    ## Description
    DynaWeb's imagined web: the tasks of ``Lynn/LiveWeb-v0`` where each step is predicted by a world model
    rather than run in Chromium. ``reset`` starts from the **real** start page of a task instance
    (recorded by ``lynn collect`` on LiveWeb); ``step`` parses the action with LiveWeb's parser, asks
    the world model for a state change Δ (:mod:`lynn.envs.worldmodel.delta`) and applies it to the
    current page. A policy moves between this env and LiveWeb unchanged.

    ## Action Space
    LiveWeb's: a Unicode text of BrowserGym high-level actions, parsed by
    :func:`lynn.envs.liveweb.actions.parse_actions` (several calls per step are imagined one after
    the other).

    ## Observation Space
    LiveWeb's ``obs_mode="text"`` space: a ``Dict`` of texts ``goal``, ``url``, ``title``, ``axtree``,
    ``open_pages``, ``last_action``, ``last_action_error``.

    ## Rewards
    0 on every step except the last: on ``send_msg_to_user``/``report_infeasible`` or at the horizon,
    the reward model (:mod:`lynn.envs.worldmodel.reward_model`) scores the episode (goal, actions,
    final imagined page, answer): ``reward_mode="binary"`` (default) gives 1 when P(success) ≥ its
    threshold, ``"prob"`` gives P(success). Without a reward model the reward is 0 and ``info`` says so.

    ## Starting mid-episode
    ``reset(options={"task_id": ..., "branch": {"obs": page, "history": [[page, action], ...]}})`` starts from
    a recorded **real** page reached by the recorded actions (a branch of a real trajectory, as MBPO branches
    model rollouts from real states): the prefix is not imagined, it is what the browser showed, and the
    reward model reads it as the episode's first steps. ``max_steps`` counts the steps after the branch
    (``info["branch_steps"]`` says how many came before). DynaWeb's trainer branches from the expert's train
    episodes (``branch_ratio``).

    ## Episode End
    Terminates on ``send_msg_to_user``/``report_infeasible``; truncated after ``max_steps`` (default: the
    registry's ``max_episode_steps``, 30; DynaWeb imagines 5).

    ## Bad input
    An unparsable action gives LiveWeb's error in ``info["error"]`` and ``last_action_error``, the page
    unchanged. A model output that is not a valid Δ leaves the page unchanged (the documented fallback)
    and puts the reason in ``info["error"]``; a hunk that does not apply is skipped and reported the
    same way. A ``correct``-mode LM (its reply corrects the retrieved Δ) whose reply is not a valid Δ
    falls back to the retrieved Δ and reports it in ``info["error"]`` too.
    ``last_action_error`` stays what LiveWeb would show (the action itself was valid).

    ## Arguments
    - ``model``: a ``lynn train world-model`` folder (or a local HF causal-LM folder), or a zoo name
      (``"zoo:webworld"``: :mod:`lynn.zoo`). Default: the zoo's world model for this id (``zoo:webworld``,
      page memory + nearest neighbour), with the zoo's reward model (``zoo:web-reward``) unless
      ``reward_model`` or ``self_assess`` is given. Nothing is trained at ``make``.
    - ``reward_model``: a folder/``reward.json`` from ``lynn train reward-model`` (or ``lynn train
      world-model --reward``) or a zoo name; with an explicit ``model`` and no ``reward_model`` the
      reward is 0 (``info["reward_note"]`` says so); ``self_assess=True`` asks the world model's LM
      instead (needs an LM).
    - ``split``: ``"train"``, ``"test"`` or ``None`` — which recorded start pages ``reset`` draws from.
    - ``starts``: a ``starts.jsonl`` or ``lynn collect`` transitions file/folder of start pages, or a list
      of them (default: the model folder's ``starts.jsonl``).
    - ``tasks``: a LiveWeb task file (e.g. a salted draw, ``python -m lynn.envs.liveweb.tasks.generate
      --salt S``) whose instances' specs (intent, sites, checks) complete their start pages, as the
      bundled bank completes its own.
    - ``reward_source``: ``"model"`` (default: the reward model scores every episode, as DynaWeb) or
      ``"checks"``: an instance whose checks read only what the dream shows at the end (``string_match``
      on the answer, ``url_match`` on the final URL) is scored by those checks, LiveWeb's own evaluators;
      the others (``db_check``, ``program_html``, ``page_list`` read a database or a live page) by the
      reward model. For train instances, whose checks are known; the test split is scored the same way.
    - ``page_memory``: complement an LM world model with the page memory (default ``True``).
    - ``llm_url``: an OpenAI-compatible endpoint serving the world model (``model`` names it).
    - ``speculative``: verification rule of the in-process LM (default ``"strict"``: lossless).
    - ``world_model``: an already built world model object (shared between envs; batched stepping).

    ## Info
    ``task_id``, ``error``, ``timings`` (seconds; wall-clock, so the id is registered
    ``nondeterministic=True``), and at the end ``success`` (P ≥ threshold), ``score`` (P(success)).

    ## Version History
    - v0: initial version; ``model``/``reward_model`` default to the zoo's (before: ``model`` was required);
      ``tasks``, ``reward_source`` and a list of ``starts`` added (defaults unchanged).
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        model: str | Path | None = None,
        reward_model: str | Path | None = None,
        split: str | None = "test",
        starts: str | Path | Sequence[str | Path] | None = None,
        tasks: str | Path | None = None,
        reward_source: str = "model",
        page_memory: bool = True,
        max_steps: int | None = None,
        multiaction: bool = True,
        reward_mode: str = "binary",
        self_assess: bool = False,
        llm_url: str | None = None,
        speculative: str | None = "strict",
        world_model: Any = None,
        render_mode: str | None = None,
    ) -> None:
        from lynn.envs.worldmodel.model import STARTS_FILE, TRAIN_HINT, load_world_model, stored

        if render_mode is not None:
            raise ValueError("WebWorldModel renders nothing (render_mode must be None)")
        if split not in (None, "train", "test"):
            raise ValueError(f"split must be 'train', 'test' or None, got {split!r}")
        if reward_mode not in ("binary", "prob"):
            raise ValueError(f"reward_mode must be 'binary' or 'prob', got {reward_mode!r}")
        if reward_source not in REWARD_SOURCES:
            raise ValueError(f"reward_source must be one of {REWARD_SOURCES}, got {reward_source!r}")
        from lynn import zoo

        if world_model is None and model is None and llm_url is None:
            # Like every Gymnasium id, the defaults work: the zoo's world model and its reward model.
            model = zoo.default_for(ENV_ID, "model")
            if reward_model is None and not self_assess:
                reward_model = zoo.default_for(ENV_ID, "reward_model")
        model = zoo.resolve(model)
        reward_model = zoo.resolve(reward_model)
        if world_model is None:
            if model is not None and llm_url is None and not Path(model).exists():
                raise ValueError(f"no world model at {model}; {TRAIN_HINT}")
            world_model = load_world_model(
                model, page_memory=page_memory, llm_url=llm_url, speculative=speculative
            )
        self.world_model = world_model
        self.reward_mode = reward_mode
        self.reward_source = reward_source
        self.reward_model: Any = None
        if self_assess:
            from lynn.envs.worldmodel.reward_model import SelfAssessReward

            gen = getattr(world_model, "generator", None)
            if gen is None:
                raise ValueError("self_assess=True needs a language-model world model (its LM judges)")
            self.reward_model = SelfAssessReward(gen)
        elif reward_model is not None:
            from lynn.envs.worldmodel.reward_model import RewardModel

            self.reward_model = RewardModel.load(reward_model)
        src = starts
        if src is None and model is not None and stored(Path(model) / STARTS_FILE).exists():
            src = stored(Path(model) / STARTS_FILE)
        if src is None:
            raise ValueError(
                "no start pages: pass starts=PATH (a `lynn collect Lynn/LiveWeb-v0` output or starts.jsonl)"
            )
        srcs = list(src) if isinstance(src, (list, tuple)) else [src]
        self.starts = [s for p in srcs for s in _read_starts(p) if split is None or s.get("split") == split]
        if not self.starts:
            raise ValueError(
                f"no recorded start pages of split {split!r} in {src}; collect some with `lynn collect`"
            )
        bank = _bundled_tasks()
        if tasks is not None:
            from lynn.envs.liveweb.tasks import load_tasks

            bank.update({t["task_id"]: t for t in load_tasks(str(tasks))})
        # The LiveWeb task (intent, sites, the expert's plan) beside its recorded start page, so privileged
        # agents read it through the same accessor (env.unwrapped.task) as on LiveWeb.
        self.starts = [{**bank.get(s["task_id"], {}), **s} for s in self.starts]
        self.by_id = {s["task_id"]: s for s in self.starts}
        self.urls: dict[str, str] = {}
        self.multiaction = bool(multiaction)
        if max_steps is not None and (isinstance(max_steps, bool) or int(max_steps) < 1):
            raise ValueError(f"max_steps must be a positive int or None, got {max_steps!r}")
        self.max_steps = None if max_steps is None else int(max_steps)
        self.observation_space = spaces.Dict({k: UnicodeText() for k in OBS_KEYS})
        self.action_space = UnicodeText(max_length=4096)
        self.task: dict[str, Any] | None = None
        self.obs: dict[str, Any] | None = None
        self.history: list[tuple[dict[str, Any], str]] = []
        self._done = False
        self._steps = 0

    @classmethod
    def list_tasks(
        cls,
        split: str | None = "test",
        starts: str | Path | None = None,
        model: str | Path | None = None,
        **_: Any,
    ) -> list[dict[str, Any]]:
        """The task instances with a recorded start page (``task_id``, ``split``, ``description``)."""
        from lynn import zoo
        from lynn.envs.worldmodel.model import STARTS_FILE, stored

        if starts is None and model is None:
            model = zoo.default_for(ENV_ID, "model")
        model = zoo.resolve(model)
        src = starts or (stored(Path(model) / STARTS_FILE) if model else None)
        if src is None:
            return []
        srcs = list(src) if isinstance(src, (list, tuple)) else [src]
        return [
            {"task_id": s["task_id"], "split": s.get("split"), "description": s.get("goal", "")}
            for p in srcs
            for s in _read_starts(p)
            if split is None or s.get("split") == split
        ]

    # --- gym API -------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        options = options or {}
        tid = options.get("task_id")
        branch = options.get("branch")
        prefix = [] if branch is None else _branch_history(branch)  # checked before anything changes
        if branch is not None and tid is None:
            raise ValueError("options['branch'] needs options['task_id'] (the task the branch belongs to)")
        if tid is not None:
            if str(tid) not in self.by_id:
                raise ValueError(
                    f"unknown task_id {tid!r}: no recorded start page (see WebWorldModelEnv.list_tasks())"
                )
            self.task = self.by_id[str(tid)]
        else:
            self.task = self.starts[int(self.np_random.integers(len(self.starts)))]
        self.urls = _site_urls(self.task)
        start = self.task["obs"] if branch is None else branch["obs"]
        self.obs = {k: str(start.get(k, "")) for k in OBS_KEYS}
        self.obs.update(goal=str(self.task.get("goal", "")))
        if branch is None:
            self.obs.update(last_action="", last_action_error="")
        self.history = prefix
        self._done = False
        self._steps = 0
        info = {"task_id": self.task["task_id"], "error": None, "timings": {}}
        if branch is not None:
            info["branch_steps"] = len(branch["history"])
        return dict(self.obs), info

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        return self.step_batch([self], [action])[0]

    @staticmethod
    def step_batch(
        envs: Sequence[WebWorldModelEnv], actions: Sequence[Any]
    ) -> list[tuple[dict, float, bool, bool, dict]]:
        """Step several envs at once: their model calls go to each world model in one batch (one
        batched generation for an LM shared by the envs). Returns each env's ``step`` result."""
        if len(envs) != len(actions):
            raise ValueError("step_batch needs one action per env")
        t0 = time.perf_counter()
        plans = [env._plan(a) for env, a in zip(envs, actions, strict=True)]
        # Multi-action steps are imagined call by call: round r asks for the r-th call of every env.
        rounds = max((len(p["calls"]) for p in plans), default=0)
        model_s = 0.0
        for r in range(rounds):
            by_model: dict[int, list[int]] = {}
            for i, p in enumerate(plans):
                if r < len(p["calls"]) and not p["error"]:
                    by_model.setdefault(id(envs[i].world_model), []).append(i)
            for idx in by_model.values():
                t = time.perf_counter()
                items = [(envs[i].obs["goal"], plans[i]["state"], plans[i]["calls"][r]) for i in idx]
                wm = envs[idx[0]].world_model
                texts = wm.predict(items)
                model_s += time.perf_counter() - t
                # A model that composes its Δ itself (an LM correcting a retrieved guess) reports its own
                # fallbacks per item in ``last_errors``.
                own = list(getattr(wm, "last_errors", None) or [])
                own = own if len(own) == len(idx) else [None] * len(idx)
                for i, text, own_err in zip(idx, texts, own, strict=True):
                    call = plans[i]["calls"][r]
                    new, err, _ = apply_delta_text(plans[i]["state"], text, call)
                    plans[i]["steps"].append((plans[i]["state"], call))
                    plans[i]["state"] = new
                    for e in (own_err, err):
                        if e:
                            plans[i]["model_errors"].append(e)
        total = time.perf_counter() - t0
        return [
            env._finish(p, model_s / max(1, len(envs)), total / max(1, len(envs)))
            for env, p in zip(envs, plans, strict=True)
        ]

    def _plan(self, action: Any) -> dict[str, Any]:
        if self.task is None or self.obs is None:
            raise RuntimeError("call reset() before step()")
        text = action if isinstance(action, str) else repr(action)
        plan: dict[str, Any] = {
            "text": text,
            "calls": [],
            "stop": None,
            "error": "",
            "model_errors": [],
            "steps": [],
            "state": dict(self.obs),
        }
        if self._done:
            plan["error"] = "the episode has ended; call reset()"
            return plan
        try:
            calls = parse_actions(action, multiaction=self.multiaction)
        except ActionError as exc:
            plan["error"] = str(exc)
            return plan
        if calls and calls[-1].name in STOP_ACTIONS:
            plan["stop"] = calls[-1]
            calls = calls[:-1]
        plan["calls"] = [str(c) for c in calls]
        return plan

    def _finish(
        self, plan: dict[str, Any], model_s: float, total_s: float
    ) -> tuple[dict, float, bool, bool, dict]:
        assert self.task is not None and self.obs is not None
        info: dict[str, Any] = {"task_id": self.task["task_id"]}
        reward, terminated, truncated = 0.0, False, False
        error = plan["error"]
        state = plan["state"]
        state["last_action"] = plan["text"][:4096]
        state["last_action_error"] = error
        state["goal"] = self.obs["goal"]
        if not self._done:
            self._steps += 1
            self.history += plan["steps"]
            stop = plan["stop"]
            if stop is not None:
                self.history.append((state, str(stop)))
            limit = self._step_limit()
            answer, infeasible = None, False
            if stop is not None:
                terminated = True
                infeasible = stop.name == "report_infeasible"
                answer = stop.args.get("reason") if infeasible else stop.args.get("text")
            elif limit is not None and self._steps >= limit:
                truncated = True
            if terminated or truncated:
                self._done = True
                p, note = self._score(state, None if truncated else answer, infeasible)
                if p is not None:
                    reward = float(p >= self._threshold()) if self.reward_mode == "binary" else float(p)
                    info.update(success=p >= self._threshold(), score=p)
                else:
                    info.update(success=False, score=0.0, reward_note=note)
        errors = [e for e in [error, *plan["model_errors"]] if e]
        info.update(error="; ".join(errors) or None, timings={"model_s": model_s, "total_s": total_s})
        self.obs = state
        return dict(state), reward, terminated, truncated, info

    def _threshold(self) -> float:
        return float(getattr(self.reward_model, "threshold", 0.5))

    def _score(self, final: dict[str, Any], answer: str | None, infeasible: bool) -> tuple[float | None, str]:
        assert self.task is not None
        kinds = set((self.task.get("eval") or {}).get("eval_types") or [])
        if self.reward_source == "checks" and kinds and kinds <= CHECKS_ON_DREAM:
            from lynn.envs.liveweb.evaluators import EvalContext, evaluate

            ctx = EvalContext(
                answer=answer,
                infeasible=infeasible,
                url=str(final.get("url", "")),
                sites=self.urls,
                intent=str(self.task.get("intent") or self.obs["goal"]),
            )
            return evaluate(self.task, ctx)[0], ""
        if self.reward_model is None:
            return None, "no reward_model given: reward 0 (train one with `lynn train reward-model`)"
        p = self.reward_model.score(
            self.task["task_id"], self.obs["goal"], self.history, final, answer, infeasible
        )
        return float(p), ""

    def _step_limit(self) -> int | None:
        if self.max_steps is not None:
            return self.max_steps
        spec = getattr(self, "spec", None)
        return getattr(spec, "max_episode_steps", None) if spec is not None else None

    def close(self) -> None:
        super().close()


def _branch_history(branch: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """The ``(page, call)`` pairs of a branch's recorded prefix, as :meth:`WebWorldModelEnv.step` keeps them
    (one per call of a multi-action step); raises ``ValueError`` on a malformed branch."""
    if not isinstance(branch, dict) or not isinstance(branch.get("obs"), dict):
        raise ValueError(
            "options['branch'] needs 'obs' (a recorded page) and 'history' ([page, action] pairs)"
        )
    out: list[tuple[dict[str, Any], str]] = []
    for pair in branch.get("history") or []:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2 or not isinstance(pair[0], dict):
            raise ValueError(f"options['branch']['history'] holds [page, action] pairs, got {pair!r:.80}")
        page, action = pair
        try:
            calls = parse_actions(action, multiaction=True)
        except ActionError as exc:
            raise ValueError(f"a branch prefix action does not parse: {exc}") from None
        out += [(dict(page), str(c)) for c in calls]
    return out


def _bundled_tasks() -> dict[str, dict[str, Any]]:
    """The bundled LiveWeb task bank by id ({} if it cannot be read)."""
    try:
        from lynn.envs.liveweb.tasks import load_tasks

        return {t["task_id"]: t for t in load_tasks(None)}
    except Exception:  # noqa: BLE001  (start pages from a user's own task file need no bank)
        return {}


def _site_urls(task: dict[str, Any]) -> dict[str, str]:
    """Site name -> origin of the recorded run (what ``__SHOP__``-style placeholders meant there)."""
    from lynn.envs.worldmodel.delta import origin

    o = origin(str(task.get("obs", {}).get("url", "")))
    return {name: o for name in task.get("sites") or []} if o else {}


def _read_starts(src: str | Path) -> list[dict[str, Any]]:
    """Start pages from a ``starts.jsonl`` or from ``lynn collect`` transitions (file or folder)."""
    from lynn.envs.worldmodel.model import open_text, stored

    p = stored(src)
    if p.is_file() and p.name.startswith("starts"):
        with open_text(p) as fh:
            return [json.loads(line) for line in fh if line.strip()]
    from lynn.envs.worldmodel.data import read_transitions, start_pages

    return start_pages(read_transitions(p))
