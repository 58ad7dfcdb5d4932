"""The model zoo (:mod:`lynn.zoo`): the shipped models verify, add/verify/resolve/default_for on a
temporary zoo, the 40 MB budget, and ``lynn zoo build`` running a card's commands for real."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lynn import zoo
from tests.conftest import run_lynn


def test_every_shipped_model_verifies_and_the_zoo_fits_its_budget() -> None:
    cards = zoo.cards()
    assert {"webworld", "web-reward"} <= {c.name for c in cards}
    for card in cards:
        assert zoo.verify(card.name) == zoo.zoo_dir() / card.name
        assert card.commands, f"{card.name}: a card says how to rebuild it"
        assert card.figures, f"{card.name}: a card states its held-out figures"
        assert (zoo.zoo_dir() / card.name / "README.md").read_text() == zoo.card_markdown(card)
    total = sum(p.stat().st_size for p in zoo.zoo_dir().rglob("*") if p.is_file())
    assert total <= zoo.BUDGET_BYTES, f"the zoo is {total / 1e6:.1f} MB"
    roles = [(env, role) for c in cards for env, role in c.default_for.items()]
    assert len(roles) == len(set(roles)), "at most one model per env and role"


@pytest.fixture
def tmp_zoo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "models"
    root.mkdir()
    monkeypatch.setenv("LYNN_ZOO", str(root))
    return root


def _trained(tmp_path: Path) -> Path:
    src = tmp_path / "trained"
    (src / "checkpoint-5").mkdir(parents=True, exist_ok=True)
    (src / "checkpoint-5" / "optimizer.pt").write_bytes(b"x" * 100)
    (src / "model.safetensors").write_bytes(b"weights")
    (src / "config.json").write_text('{"a": 1}')
    return src


def test_add_resolve_default_and_a_changed_file(tmp_zoo: Path, tmp_path: Path) -> None:
    card = zoo.add(
        "evm-lm",
        _trained(tmp_path),
        {"kind": "lm-target", "description": "d", "default_for": {"Lynn/EVMQuest-v0": "lm"}},
    )
    assert set(card.files) == {"model.safetensors", "config.json"}  # training checkpoints left out
    assert card.bytes == len(b"weights") + len('{"a": 1}') and card.added
    folder = tmp_zoo / "evm-lm"
    assert zoo.resolve("zoo:evm-lm") == str(folder) and zoo.resolve("/some/path") == "/some/path"
    assert zoo.default_for("lynn:Lynn/EVMQuest-v0", "lm") == "zoo:evm-lm"
    with pytest.raises(zoo.ZooError, match="no draft for Lynn/EVMQuest-v0: pass draft=PATH"):
        zoo.default_for("Lynn/EVMQuest-v0", "draft")
    with pytest.raises(zoo.ZooError, match="no zoo model 'nope'.*the zoo has: evm-lm"):
        zoo.resolve("zoo:nope")
    (folder / "config.json").write_text('{"a": 2}')
    with pytest.raises(zoo.ZooError, match=r"config.json changed .*lynn zoo build evm-lm"):
        zoo.resolve("zoo:evm-lm")
    (folder / "config.json").unlink()
    with pytest.raises(zoo.ZooError, match=r"config.json is missing"):
        zoo.resolve("zoo:evm-lm")


def test_add_refuses_a_model_over_the_budget_and_writes_nothing(tmp_zoo: Path, tmp_path: Path) -> None:
    with pytest.raises(zoo.ZooError, match="over the 0 MB budget"):
        zoo.add("big", _trained(tmp_path), {"kind": "x", "description": "d"}, budget=10)
    assert not any(tmp_zoo.iterdir())


def test_a_card_with_an_unknown_field_is_refused(tmp_zoo: Path) -> None:
    (tmp_zoo / "m").mkdir()
    (tmp_zoo / "m" / "card.json").write_text(
        json.dumps({"name": "m", "kind": "x", "description": "d", "sha": 1})
    )
    with pytest.raises(zoo.ZooError, match=r"unknown card field\(s\) \['sha'\]"):
        zoo.cards()


def test_build_runs_the_cards_commands_shares_data_and_installs(tmp_zoo: Path, tmp_path: Path) -> None:
    # A real build: the data command writes $DATA/KEY once, the train command writes $OUT from it.
    collect = "python -c \"import os, pathlib; d = pathlib.Path(os.environ['DATA'], 'src'); d.mkdir(parents=True); (d / 'x.txt').write_text('data')\""
    train = "python -c \"import os, pathlib; o = pathlib.Path(os.environ['OUT']); o.mkdir(parents=True); (o / 'model.bin').write_text(pathlib.Path(os.environ['DATA'], 'src', 'x.txt').read_text() + '!')\""
    for name in ("a", "b"):
        zoo.add(
            name,
            _trained(tmp_path),
            {"kind": "x", "description": "d", "data_commands": {"src": collect}, "commands": [train]},
        )
    report = zoo.build(data=tmp_path / "data", out=tmp_path / "out", install=True)
    assert [len(r["commands"]) for r in report] == [2, 1]  # the shared data ran once
    for name in ("a", "b"):
        assert (tmp_zoo / name / "model.bin").read_text() == "data!"
        assert set(zoo.Card.load(tmp_zoo / name / "card.json").files) == {"model.bin"}
        zoo.verify(name)


def test_the_zoo_command(tmp_zoo: Path, tmp_path: Path) -> None:
    card = tmp_path / "card.json"
    card.write_text(json.dumps({"kind": "lm-target", "description": "a tiny one", "commands": ["true"]}))
    env = {"LYNN_ZOO": str(tmp_zoo)}
    proc = run_lynn("zoo", "add", "m", str(_trained(tmp_path)), "--card-json", str(card), extra_env=env)
    assert proc.returncode == 0, proc.stderr
    assert "zoo:m: 2 files" in proc.stdout
    proc = run_lynn("zoo", "list", extra_env=env)
    assert "zoo:m" in proc.stdout and "a tiny one" in proc.stdout and "of 40 MB" in proc.stdout
    (tmp_zoo / "m" / "model.safetensors").write_bytes(b"other")
    proc = run_lynn("zoo", "verify", extra_env=env)
    assert proc.returncode == 2 and "model.safetensors changed" in proc.stderr


def test_a_card_from_a_lynn_train_summary_names_the_command_that_retrains_it(tmp_path: Path) -> None:
    summary = {
        "role": "target",
        "size": "base",
        "parameters": 4_260_000,
        "examples": 912,
        "steps": 690,
        "cpu_minutes": 9.74,
        "final_loss": 0.412,
        "capped_by_minutes": False,
        "config": {"data": "/somewhere/evm_demos", "size": "base", "role": "target", "epochs": 6.0,
                   "steps": None, "batch_size": 8, "lr": 0.001, "seed": 3, "compact": True},
    }  # fmt: skip
    (tmp_path / "lynn_train.json").write_text(json.dumps(summary))
    card = zoo.card_from_train_summary(tmp_path)
    assert card["commands"] == [
        "lynn train lm --data $DATA/evm_demos --out $OUT --size base --role target --epochs 6.0 "
        "--batch-size 8 --lr 0.001 --seed 3 --threads 1 --no-progress --compact"
    ]
    assert (card["kind"], card["seed"], card["steps"], card["cpu_minutes"]) == ("lm-target", 3, 690, 9.7)
    assert "4.26M parameters" in card["notes"] and "912 examples" in card["data"]
    from lynn.cli import build_parser

    args = build_parser().parse_args(card["commands"][0].split()[1:])  # the command parses as written
    assert args.compact and args.seed == 3 and args.size == "base"


def test_build_trains_drafts_after_the_targets_they_are_distilled_from(tmp_zoo: Path, tmp_path: Path) -> None:
    for name, kind in (("a-draft", "lm-draft"), ("b-lm", "lm-target")):
        zoo.add(name, _trained(tmp_path), {"kind": kind, "description": "d", "commands": ["true"]})
    report = zoo.build(data=tmp_path / "data", out=tmp_path / "out", dry_run=True)
    assert [r["name"] for r in report] == ["b-lm", "a-draft"]


SHIPPED = Path(zoo.__file__).resolve().parent.parent / "models"
CONTRACTS = (
    "WBNB, USDT, BUSD, CAKE, LPAY, FUSD, PancakeRouter, PancakeFactory, WBNB_USDT_LP, WBNB_CAKE_LP, "
    "USDT_BUSD_LP, LynnPunks, LynnItems, Token1363Receiver, FlashBorrower, CAKEStakingPool, LPFarm, Counter, "
    "MessageBoard, DonationBox, FallbackReceiver, DelegateTarget, DelegateCaller"
)


def test_the_zoo_draft_goes_with_the_zoo_target_and_is_checked(tmp_zoo: Path) -> None:
    """zoo:evm-draft is EVMQuest's draft: speculative decoding with drafter="draft" takes it beside the zoo's
    target (after checking its sha256), replies as greedy does, and no draft is guessed anywhere else."""
    from lynn.agents.llm import LMPolicy
    from lynn.lm.backends import TransformersGenerator
    from lynn.lm.prompts import EVM_SYSTEM

    assert zoo.default_for("Lynn/EVMQuest-v0", "draft", root=SHIPPED) == "zoo:evm-draft"
    card = zoo.Card.load(SHIPPED / "evm-draft" / "card.json")
    assert card.kind == "lm-draft" and any("--teacher zoo:evm-lm" in c for c in card.commands)
    for name in ("evm-lm", "evm-draft"):
        shutil.copytree(SHIPPED / name, tmp_zoo / name)
    (tmp_zoo / "web-lm").mkdir()
    shutil.copy(SHIPPED / "web-lm" / "card.json", tmp_zoo / "web-lm")  # its card is all default_for reads

    agent = LMPolicy(env_id="Lynn/EVMQuest-v0", speculative="strict", drafter="draft", threads=1)
    draft = agent.generator.draft_model
    assert draft is not None and draft.config.hidden_size == card_hidden(tmp_zoo / "evm-draft")
    task = "Task: Send @N1 BNB to @A1.\nAddress: 0x869055C910142a4D698Ab32d7942F6bb67D5D054\nStep: 0\n"
    prompt = [  # an EVMQuest prompt as LMPolicy renders it for zoo:evm-lm (slots, Done: line)
        {"role": "system", "content": EVM_SYSTEM},
        {"role": "user", "content": task + "Done: nothing\nLast result: none\nContracts: " + CONTRACTS},
    ]
    greedy = TransformersGenerator(str(tmp_zoo / "evm-lm"), threads=1)
    [ours] = agent.generator.generate([prompt], max_new_tokens=96, temperature=0.0)
    [plain] = greedy.generate([prompt], max_new_tokens=96, temperature=0.0)
    assert ours.text == plain.text and "def execute_skill" in ours.text

    with pytest.raises(ValueError, match="drafter='draft' needs draft=PATH"):  # another target: no zoo draft
        LMPolicy(
            env_id="Lynn/EVMQuest-v0", model=str(tmp_zoo / "evm-lm"), speculative="strict", drafter="draft"
        )
    with pytest.raises(zoo.ZooError, match="no draft for Lynn/LiveWeb-v0: pass draft=PATH"):
        LMPolicy(env_id="Lynn/LiveWeb-v0", speculative="strict", drafter="draft")
    weights = tmp_zoo / "evm-draft" / "model.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 1
    weights.write_bytes(bytes(raw))
    with pytest.raises(zoo.ZooError, match=r"'evm-draft': file .*model.safetensors changed"):
        LMPolicy(env_id="Lynn/EVMQuest-v0", speculative="mars", drafter="draft", threads=1)


def card_hidden(folder: Path) -> int:
    return int(json.loads((folder / "config.json").read_text())["hidden_size"])
