"""The ``lynn`` commands' flags are their config dataclasses' fields (:mod:`lynn.config_flags`): every field
is a flag with the field's default, and the commands users and the zoo cards run still parse."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
from dataclasses import dataclass, field
from typing import Any

import pytest

from lynn.agents.dynaweb.config import DynaWebConfig
from lynn.agents.llm.grpo_config import GRPOTrainConfig
from lynn.cli import build_parser
from lynn.config_flags import add_config_flags, config_from_args, field_flags, field_help
from lynn.envs.worldmodel.train import RewardModelConfig, WorldModelConfig
from lynn.eval.collect import CollectConfig
from lynn.eval.runner import EvalConfig
from lynn.lm.train import SIZES, TrainConfig
from lynn.suite.run import SuiteConfig
from tests.conftest import REPO

# (the command's words, its config dataclass)
CONFIG_COMMANDS: list[tuple[tuple[str, ...], type]] = [
    (("train", "lm"), TrainConfig),
    (("train", "grpo"), GRPOTrainConfig),
    (("train", "dynaweb"), DynaWebConfig),
    (("suite",), SuiteConfig),
    (("eval",), EvalConfig),
    (("collect",), CollectConfig),
    (("train", "world-model"), WorldModelConfig),
    (("train", "reward-model"), RewardModelConfig),
]


def _subparser(words: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser()
    for word in words:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


@pytest.mark.parametrize("words, cls", CONFIG_COMMANDS, ids=[" ".join(w) for w, _ in CONFIG_COMMANDS])
def test_every_config_field_is_a_flag_with_the_same_default(words: tuple[str, ...], cls: type) -> None:
    actions = {a.dest: a for a in _subparser(words)._actions}
    helps = field_help(cls)
    for f in dataclasses.fields(cls):
        assert f.name in actions, f"lynn {' '.join(words)} has no flag for {cls.__name__}.{f.name}"
        action = actions[f.name]
        if f.metadata.get("positional"):
            assert action.option_strings == [] and action.required, (f.name, action.option_strings)
        else:
            primary = f.metadata.get("flag") or f"--{f.name.replace('_', '-')}"
            assert primary in action.option_strings, (f.name, action.option_strings)
            assert set(field_flags(f)) <= set(action.option_strings), (f.name, action.option_strings)
        if action.required:
            assert f.metadata.get("required") or _default(f) is dataclasses.MISSING, f.name
        else:
            assert action.default == _default(f), (f.name, action.default, _default(f))
        assert helps[f.name], f"{cls.__name__}.{f.name} has no help (field metadata or docstring)"


def test_train_lm_round_trip_and_the_size_help_lists_every_preset() -> None:
    parser = build_parser()
    args = parser.parse_args(["train", "lm", "--data", "D", "--out", "O"])
    assert config_from_args(TrainConfig, args) == TrainConfig(data="D", out="O")
    help_text = " ".join(_subparser(("train", "lm")).format_help().split())
    assert f"model preset: {' | '.join(SIZES)}" in help_text and "base" in SIZES
    args = parser.parse_args(
        ["train", "lm", "--data", "D", "--out", "O", "--size", "base", "--no-progress", "--choice-sample"]
    )
    cfg = config_from_args(TrainConfig, args)
    assert (cfg.size, cfg.progress, cfg.choice_sample) == ("base", False, True)


def test_train_grpo_flags_as_the_docs_write_them() -> None:
    argv = shlex.split(
        "train grpo --model M --out O --mode colocated --threads 2 --updates 10 --groups 2 --level sequence "
        "--tasks wbnb_deposit,erc20_transfer --max-minutes 1.5 --eval --eval-workers 2 --no-progress"
    )
    cfg = config_from_args(GRPOTrainConfig, build_parser().parse_args(argv))
    assert cfg == GRPOTrainConfig(
        model="M",
        out="O",
        mode="colocated",
        threads=2,
        updates=10,
        groups_per_update=2,
        importance_sampling_level="sequence",
        tasks=["wbnb_deposit", "erc20_transfer"],
        max_minutes=1.5,
        eval_heldout=True,
        eval_workers=2,
        progress=False,
    )
    assert config_from_args(
        GRPOTrainConfig, build_parser().parse_args(["train", "grpo", "--model", "M", "--out", "O"])
    ) == GRPOTrainConfig(model="M", out="O")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "grpo", "--model", "M", "--out", "O", "--mode", "nope"])


def test_train_dynaweb_lists_and_bools() -> None:
    argv = ["train", "dynaweb", "--policy", "P", "--out", "O", "--world-model", "W", "--expert-ratio", "0"]
    args = build_parser().parse_args(
        [*argv, "--tasks", "a,b", "--tasks", "c", "--self-assess", "--no-progress"]
    )
    cfg = config_from_args(DynaWebConfig, args)
    assert cfg.tasks == ["a", "b", "c"] and cfg.self_assess and not cfg.progress
    assert config_from_args(DynaWebConfig, build_parser().parse_args(argv)).tasks == []


def test_eval_flags_as_the_docs_write_them() -> None:
    argv = shlex.split(
        "eval Lynn/EVMQuest-v0 --agent lm --agent-arg model='\"zoo:evm-lm\"' --agent-arg temperature=0.5 "
        "--env-arg profile=reference --split atomic --tasks a,b --tasks c --episodes 2 --workers 3 "
        "--max-steps 9 --label lm-x --backend ray --address H:1 --fresh --no-progress --json"
    )
    args = build_parser().parse_args(argv)
    assert args.json
    assert config_from_args(EvalConfig, args) == EvalConfig(
        env_id="Lynn/EVMQuest-v0",
        agent="lm",
        agent_kwargs={"model": "zoo:evm-lm", "temperature": 0.5},
        env_kwargs={"profile": "reference"},  # not JSON: the text itself
        split="atomic",
        tasks=["a", "b", "c"],
        episodes=2,
        workers=3,
        max_steps=9,
        label="lm-x",
        backend="ray",
        address="H:1",
        fresh=True,
        progress=False,
    )
    assert config_from_args(EvalConfig, build_parser().parse_args(["eval", "X-v0"])) == EvalConfig("X-v0")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["eval", "X-v0", "--backend", "nope"])


def test_collect_flags_seeds_ranges_and_the_epsilon_shortcut() -> None:
    argv = shlex.split(
        "collect Lynn/EVMQuest-v0 --split atomic --seeds 100000:100003 --instance-split any --limit 2 "
        "--agent-arg epsilon=0.2 --env-arg max_steps=3 --tasks t1 --max-steps 5 --no-progress"
    )
    cfg = config_from_args(CollectConfig, build_parser().parse_args(argv))
    assert cfg == CollectConfig(
        env_id="Lynn/EVMQuest-v0",
        split="atomic",
        seeds=[100000, 100001, 100002],
        instance_split="any",
        limit=2,
        agent_kwargs={"epsilon": 0.2},
        env_kwargs={"max_steps": 3},
        tasks=["t1"],
        max_steps=5,
        progress=False,
    )
    cfg = config_from_args(CollectConfig, build_parser().parse_args(["collect", "E", "--seeds", "1,5"]))
    assert cfg.seeds == [1, 5] and cfg.instance_split == "train" and cfg.agent_kwargs == {}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["eval", "E", "--env-arg", "novalue"], "--env-arg expects KEY=VALUE"),
        (["collect", "E", "--agent-arg", "=1"], "--agent-arg expects KEY=VALUE"),
        (["collect", "E", "--seeds", "a:b"], "--seeds expects A:B"),
    ],
)
def test_a_bad_flag_value_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from lynn.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("lynn: error:") and message in err[0], err


def test_train_world_model_space_separated_data_and_keep_all_corrections() -> None:
    argv = ["train", "world-model", "--data", "A", "B", "--out", "O", "--kind", "memory", "--mode", "correct"]
    args = build_parser().parse_args(argv)
    cfg = config_from_args(WorldModelConfig, args)
    assert (cfg.data, cfg.kind, cfg.mode, cfg.margin) == (["A", "B"], "memory", "correct", 0.0)
    args = build_parser().parse_args([*argv, "--keep-all-corrections", "--reward"])
    assert args.reward and args.keep_all_corrections
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "world-model", "--data", "A", "--out", "O", "--kind", "nope"])


def test_train_reward_model_flags_as_the_card_writes_them_and_world_model_reward() -> None:
    argv = ["train", "reward-model", "--data", "A", "B", "--out", "O", "--seed", "3", "--all-templates"]
    cfg = config_from_args(RewardModelConfig, build_parser().parse_args(argv))
    assert (cfg.data, cfg.out, cfg.seed, cfg.all_templates) == (["A", "B"], "O", 3, True)
    cfg = config_from_args(RewardModelConfig, build_parser().parse_args(argv[:7]))
    assert (cfg.seed, cfg.all_templates) == (0, False)
    # `lynn train world-model --reward` trains the reward model from the world model's own flags.
    wm = build_parser().parse_args(
        ["train", "world-model", "--data", "A", "--out", "O", "--reward", "--seed", "2"]
    )
    assert config_from_args(RewardModelConfig, wm) == RewardModelConfig(
        ["A"], "O", seed=2, all_templates=False
    )


def test_train_lm_role_has_its_choices() -> None:
    base = ["train", "lm", "--data", "D", "--out", "O"]
    assert (
        config_from_args(TrainConfig, build_parser().parse_args([*base, "--role", "draft"])).role == "draft"
    )
    with pytest.raises(SystemExit):
        build_parser().parse_args([*base, "--role", "teacher"])


def _card_train_commands() -> list[tuple[str, str]]:
    out = []
    for path in sorted((REPO / "models").glob("*/card.json")):
        card = json.loads(path.read_text())
        # The commands `lynn zoo build` runs: the data's (collect), then the training's.
        for command in [*card.get("data_commands", {}).values(), *card.get("commands", [])]:
            for part in command.split("&&"):
                if part.strip().startswith(("lynn train ", "lynn collect ", "lynn eval ")):
                    out.append((path.parent.name, part.strip()))
    return out


CARD_COMMANDS = _card_train_commands()


def test_the_zoo_cards_have_train_commands() -> None:
    assert {name for name, _ in CARD_COMMANDS} >= {"evm-lm", "web-lm", "webworld", "web-reward"}


@pytest.mark.parametrize(
    "name, command", CARD_COMMANDS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CARD_COMMANDS)]
)
def test_every_zoo_card_train_command_parses(name: str, command: str) -> None:
    argv = shlex.split(command.replace("$DATA", "/data").replace("$OUT", "/out"))[1:]
    args = build_parser().parse_args(argv)  # SystemExit (argparse's error) on a flag the CLI lost
    if argv[:2] == ["train", "lm"]:
        cfg = config_from_args(TrainConfig, args)
        assert cfg.size in SIZES and not cfg.progress, (name, cfg)


# --- the helper itself -----------------------------------------------------------------------------
@dataclass
class _Demo:
    """A config.

    Attributes:
        name: who (the first sentence is the help). Details stay here.
        rate: how fast, in % per step.
    """

    name: str
    rate: float = 0.5
    items: list[int] = field(default_factory=lambda: [1, 2], metadata={"help": "numbers"})
    fast: bool = field(default=True, metadata={"help": "go fast", "aliases": ("--quick",)})
    no_cache: bool = field(default=False, metadata={"help": "skip the cache"})
    extra: dict[str, Any] = field(default_factory=dict, metadata={"help": "anything"})
    mode: str | None = field(default=None, metadata={"help": "a or b", "choices": ("a", "b")})


def test_the_helper_types_aliases_lists_json_and_docstring_help() -> None:
    parser = argparse.ArgumentParser()
    add_config_flags(parser, _Demo)
    cfg = config_from_args(_Demo, parser.parse_args(["--name", "x"]))
    assert cfg == _Demo(name="x")
    argv = ["--name", "x", "--rate", "2", "--items", "3,4", "--items", "5", "--no-quick", "--no-cache"]
    cfg = config_from_args(_Demo, parser.parse_args([*argv, "--extra", '{"k": [1]}', "--mode", "b"]))
    assert cfg == _Demo(
        name="x", rate=2.0, items=[3, 4, 5], fast=False, no_cache=True, extra={"k": [1]}, mode="b"
    )
    assert config_from_args(_Demo, parser.parse_args(["--name", "y"])).items == [1, 2]
    assert field_help(_Demo)["name"] == "who (the first sentence is the help)."
    assert "%" in parser.format_help()  # a literal % in help does not break argparse's formatting
    assert field_flags(dataclasses.fields(_Demo)[3]) == ["--fast", "--quick"]
    with pytest.raises(SystemExit):
        parser.parse_args([])  # name has no default: required
    with pytest.raises(SystemExit):
        parser.parse_args(["--name", "x", "--mode", "c"])
