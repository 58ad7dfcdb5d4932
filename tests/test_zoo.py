"""The model zoo (:mod:`lynn.zoo`): the shipped models verify, add/verify/resolve/default_for on a
temporary zoo, the 40 MB budget, and ``lynn zoo build`` running a card's commands for real."""

from __future__ import annotations

import json
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
