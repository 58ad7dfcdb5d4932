"""Scoring profiles of Lynn/EVMQuest-v0: one object per ``scoring=`` choice.

A profile decides what differs between our rules and the reference's: the parameter ranges a
task is drawn from, the set-up before the episode, the steps it may take, the state measured,
how an answer must look and how the episode is scored. :class:`DefaultScoring` is our sound,
strict rule set; :class:`ReferenceScoring` is EVM-QuestBench's own
(:mod:`~lynn.envs.evmquest.reference`), falling back to ours for tasks it has not ported. The
env holds one (``env.scorer``) and asks it; it never branches on the profile's name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the env imports this module at start-up: the chain side loads when first used
    from lynn.envs.evmquest.answers import AnswerSpec
    from lynn.envs.evmquest.spec import TaskInstance, TaskSpec
    from lynn.envs.evmquest.taskkit import Ctx, TaskLogic


class DefaultScoring:
    """Our rules: hidden per-episode state, strict answers, the task's own steps and checks."""

    name = "default"

    def spec_for(self, spec: TaskSpec) -> TaskSpec:
        """The spec instances are drawn from (this profile's parameter ranges)."""
        return spec

    def setup(self, world: Any, logic: TaskLogic, instance: TaskInstance, np_random: Any) -> None:
        """Prepares the chain for ``instance`` after the snapshot was restored."""
        from lynn.envs.evmquest import noise

        # Hidden state drawn after the instruction, so a seed renders the same instruction as before.
        instance.params["hidden"] = noise.draw(instance.task_id, np_random)
        noise.apply(world, instance.params)
        world.forget_nonces()
        logic.setup(world, instance.params)

    def max_steps(self, spec: TaskSpec) -> int:
        """Steps an episode of ``spec`` may take."""
        return spec.max_steps

    def split_name(self, split: str) -> str:
        """The split as leaderboards should show it."""
        return split

    def measure(self, world: Any, logic: TaskLogic, instance: TaskInstance) -> dict[str, Any]:
        """The state the validator compares before and after the agent acted."""
        return logic.measure(world, instance.params)

    def check_answer(self, value: Any, spec: AnswerSpec | None, composite: bool) -> str | None:
        """What is wrong with an answer's shape (None: it is accepted and recorded)."""
        from lynn.envs.evmquest.answers import check_shape

        return check_shape(value, spec, composite)

    def answer_format(self, instance: TaskInstance, spec: AnswerSpec, names: dict[str, str]) -> str:
        """How the answer to ``instance`` must look, as the prompt and ``info`` state it."""
        text = spec.render()
        for key, value in {**names, **instance.display}.items():
            text = text.replace("{" + key + "}", value)
        if spec.fields and instance.spec.split == "composite":
            text += " (fields may be reported over several answers; the last value given for a field counts)"
        return text

    def score(self, spec: TaskSpec, logic: TaskLogic, ctx: Ctx, rounds: int) -> tuple[float, dict[str, Any]]:
        """``(reward, info)`` of a finished episode: the weight of the passing checks out of 100.

        Composite tasks multiply by ``min(1, optimal_steps / rounds)``; ``rounds`` counts every
        execution round (failed ones too) but not the closing ``{"done": true}``.
        """
        checks = logic.checks(ctx)
        base = float(sum(c.weight for c in checks if c.passed))
        if logic.answer is None and not any(t.status == 1 for t in ctx.txs):
            base = 0.0  # checks of state nothing changed (e.g. "stake kept") earn nothing without an action
        if spec.split == "atomic":
            score = base
            success = all(c.passed for c in checks)
        else:
            decay = min(1.0, spec.optimal_steps / rounds) if rounds > 0 and (ctx.txs or ctx.answers) else 0.0
            score = base * decay
            # Strict: every check of the end state must pass (the score keeps partial credit).
            success = bool(checks) and all(c.passed for c in checks) and decay > 0
        return score / 100.0, {"checks": [c.as_dict() for c in checks], "score": score, "success": success}


class ReferenceScoring(DefaultScoring):
    """EVM-QuestBench's rules (:mod:`~lynn.envs.evmquest.reference`) where ported, ours elsewhere.

    ``info["reference_port"]`` says which applied.
    """

    name = "reference"

    def spec_for(self, spec: TaskSpec) -> TaskSpec:
        from lynn.envs.evmquest.reference import spec_for

        return spec_for(spec)

    def setup(self, world: Any, logic: TaskLogic, instance: TaskInstance, np_random: Any) -> None:
        from lynn.envs.evmquest import reference

        logic.setup(world, instance.params)  # no hidden state: the reference has none
        world.forget_nonces()
        reference.setup(world, instance.task_id, instance.params)

    def max_steps(self, spec: TaskSpec) -> int:
        from lynn.envs.evmquest.reference import max_steps

        return max_steps(spec.task_id, spec.split)

    def split_name(self, split: str) -> str:
        return f"{split}/{self.name}"

    def measure(self, world: Any, logic: TaskLogic, instance: TaskInstance) -> dict[str, Any]:
        """Ours plus what the reference's snapshot holds."""
        from lynn.envs.evmquest import reference

        state = logic.measure(world, instance.params)
        state.update(reference.measure(world, instance.spec.task_id, instance.params))
        return state

    def check_answer(self, value: Any, spec: AnswerSpec | None, composite: bool) -> str | None:
        return None  # the reference records any answer and judges it when scoring

    def answer_format(self, instance: TaskInstance, spec: AnswerSpec, names: dict[str, str]) -> str:
        from lynn.envs.evmquest.reference import QUERY_FIELDS

        if instance.spec.split == "atomic" and instance.task_id in QUERY_FIELDS:  # its own answer format
            fields = ", ".join(repr(f) for f in QUERY_FIELDS[instance.task_id])
            return f"a JSON object with the fields {fields} (integers as decimal strings)"
        return super().answer_format(instance, spec, names)

    def score(self, spec: TaskSpec, logic: TaskLogic, ctx: Ctx, rounds: int) -> tuple[float, dict[str, Any]]:
        from lynn.envs.evmquest import reference

        if not reference.is_ported(spec.task_id, spec.split):
            reward, info = super().score(spec, logic, ctx, rounds)
            return reward, {**info, "reference_port": False}
        extra: dict[str, Any] = {}
        if spec.split == "atomic":
            score, success, checks = reference.score_atomic(spec.task_id, ctx)
        else:
            score, success, checks, decay = reference.score_composite(spec.task_id, ctx, rounds)
            extra = {"decay": decay}
        return score / 100.0, {
            "checks": [c.as_dict() for c in checks],
            "score": score,
            "success": success,
            "reference_port": True,
            **extra,
        }


SCORINGS: dict[str, type[DefaultScoring]] = {"default": DefaultScoring, "reference": ReferenceScoring}
