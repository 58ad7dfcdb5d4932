"""The model zoo: the shipped checkpoints under ``models/``, one folder per model with a card.

A zoo model is named ``zoo:NAME`` wherever a model folder is taken (``LMPolicy(model="zoo:evm-lm")``,
``gym.make("Lynn/WebWorldModel-v0", model="zoo:webworld")``, ``--agent-arg model='"zoo:evm-lm"'``);
:func:`resolve` turns the name into the folder after checking every file's sha256 against the card, and
says which file is missing or changed and how to rebuild it. Envs and agents given no model ask
:func:`default_for` for the zoo's model of their env.

Each folder holds the model's files and ``card.json`` (:class:`Card`): what it is, which env it is the
default for, the data and the exact commands that rebuild it from scratch (``make models`` runs them:
:func:`build`), seed, steps, CPU minutes, held-out figures and the sha256 of each file. ``README.md``
beside it is the card rendered for people (:func:`card_markdown`). ``lynn zoo add NAME PATH --card-json
FILE`` puts a trained folder in the zoo (:func:`add`). The zoo stays under :data:`BUDGET_BYTES` in all.

The zoo folder is the checkout's ``models/`` (``$LYNN_ZOO`` overrides it). Standard library only: any
layer may import this module.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lynn.errors import UsageError

__all__ = [
    "BUDGET_BYTES",
    "Card",
    "ZooError",
    "add",
    "build",
    "card_from_train_summary",
    "card_markdown",
    "cards",
    "default_for",
    "is_zoo_name",
    "resolve",
    "verify",
    "zoo_dir",
]

PREFIX = "zoo:"
CARD_FILE = "card.json"
README_FILE = "README.md"
#: The whole zoo (every model folder together) stays under this many bytes (issue 29: 40 MB).
BUDGET_BYTES = 40_000_000
#: Files that describe a model rather than make it: not hashed.
_META = frozenset({CARD_FILE, README_FILE})
_verified: dict[tuple[Any, ...], Path] = {}


def _stat(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (-1, -1)
    return (st.st_size, st.st_mtime_ns)


class ZooError(UsageError, ValueError):
    """A zoo name that does not resolve: unknown, or a file missing or changed (the message says how to fix)."""


@dataclass
class Card:
    """A model card (``models/NAME/card.json``).

    Attributes:
        name: the zoo name (``zoo:NAME``); also the folder name.
        kind: ``lm-target``, ``lm-draft``, ``world-model``, ``reward-model`` (free text for others).
        description: one line.
        default_for: env id -> role: ``lm`` (agent ``lm``'s model there), ``draft`` (its draft), ``model``
            and ``reward_model`` (the env's own models): what that env or agent uses when given none.
        data: how the training data was made (one paragraph).
        data_commands: name -> shell command that writes ``$DATA/name`` (shared by cards: run once).
        commands: shell commands that train the model into ``$OUT`` from ``$DATA`` (``make models``).
        seed: training seed; steps: optimiser steps (or fits) it ran; cpu_minutes: its training time.
        machine: where the minutes were measured.
        figures: held-out figures, name -> value (what the card promises; the suite reproduces them).
        figures_command: the command that prints the figures.
        files: relative path -> sha256 of every file of the model (written by :func:`add`).
        bytes: total size of those files.
        notes: anything a user should know (dtype, caveats).
        added: UTC date it entered the zoo.
    """

    name: str
    kind: str
    description: str
    default_for: dict[str, str] = field(default_factory=dict)
    data: str = ""
    data_commands: dict[str, str] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)
    seed: int | None = None
    steps: int | None = None
    cpu_minutes: float | None = None
    machine: str = ""
    figures: dict[str, Any] = field(default_factory=dict)
    figures_command: str = ""
    files: dict[str, str] = field(default_factory=dict)
    bytes: int = 0
    notes: str = ""
    added: str = ""

    @classmethod
    def load(cls, path: str | Path) -> Card:
        """Read a ``card.json`` (unknown keys are refused with their names)."""
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        known = set(cls.__dataclass_fields__)
        extra = sorted(set(raw) - known)
        if extra:
            raise ZooError(f"{path}: unknown card field(s) {extra}; known: {sorted(known)}")
        missing = [k for k in ("name", "kind", "description") if k not in raw]
        if missing:
            raise ZooError(f"{path}: card misses {missing}")
        return cls(**raw)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, ensure_ascii=False) + "\n"


def zoo_dir() -> Path:
    """The zoo folder: ``$LYNN_ZOO`` or the checkout's ``models/``."""
    env = os.environ.get("LYNN_ZOO")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "models"


def is_zoo_name(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def cards(root: str | Path | None = None) -> list[Card]:
    """Every card in the zoo, sorted by name."""
    root = Path(root) if root is not None else zoo_dir()
    return [Card.load(p) for p in sorted(root.glob(f"*/{CARD_FILE}"))]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _rebuild_hint(name: str) -> str:
    return (
        f"rebuild it with `lynn zoo build {name}` (or `make models`; the commands are in "
        f"models/{name}/{CARD_FILE}), or restore the shipped files with `git checkout -- models/{name}`"
    )


def verify(name: str, root: str | Path | None = None) -> Path:
    """The folder of zoo model ``name`` after checking every file against its card's sha256.

    Raises:
        ZooError: unknown name (lists the zoo), no card, or a file missing or changed (named, with the
            command that rebuilds it).
    """
    root = Path(root) if root is not None else zoo_dir()
    folder = root / name
    card_path = folder / CARD_FILE
    if not card_path.exists():
        known = ", ".join(c.name for c in cards(root)) if root.is_dir() else ""
        raise ZooError(
            f"no zoo model {name!r} (no {card_path}); the zoo has: {known or 'nothing'}"
            + ("" if root.is_dir() else f" ({root} does not exist; set $LYNN_ZOO to a checkout's models/)")
        )
    card = Card.load(card_path)
    if not card.files:
        raise ZooError(f"zoo model {name!r} lists no files in its card; {_rebuild_hint(name)}")
    # Hash once per process while no file's size or mtime moves (a model is loaded many times).
    key = (
        str(folder.resolve()),
        card_path.stat().st_mtime_ns,
        tuple(_stat(folder / r) for r in sorted(card.files)),
    )
    if key in _verified:
        return _verified[key]
    for rel, digest in sorted(card.files.items()):
        p = folder / rel
        if not p.is_file():
            raise ZooError(f"zoo model {name!r}: file {p} is missing; {_rebuild_hint(name)}")
        if _sha256(p) != digest:
            raise ZooError(
                f"zoo model {name!r}: file {p} changed (sha256 differs from {card_path}); {_rebuild_hint(name)}"
            )
    _verified[key] = folder
    return folder


def resolve(value: Any, root: str | Path | None = None) -> Any:
    """``"zoo:NAME"`` -> the verified folder (a ``str``); anything else is returned unchanged."""
    if not is_zoo_name(value):
        return value
    name = value[len(PREFIX) :]
    if not name or "/" in name:
        raise ZooError(f"a zoo name is zoo:NAME (a folder under models/), got {value!r}")
    return str(verify(name, root))


def default_for(env_id: str, role: str = "model", root: str | Path | None = None) -> str:
    """The ``zoo:NAME`` the zoo ships as ``env_id``'s ``role`` (``lm``, ``draft``, ``model``, ``reward_model``).

    Raises:
        ZooError: the zoo has none (the message says what to pass instead).
    """
    env_id = env_id.removeprefix("lynn:")
    for card in cards(root) if (Path(root) if root else zoo_dir()).is_dir() else []:
        if card.default_for.get(env_id) == role:
            return PREFIX + card.name
    raise ZooError(
        f"the zoo (models/) has no {role} for {env_id}: pass {'model' if role == 'lm' else role}=PATH (a "
        "trained folder, e.g. from "
        "`lynn train ...`) or add one to the zoo (models/README.md)"
    )


def _files(folder: Path) -> dict[str, str]:
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if p.is_file() and rel not in _META and "__pycache__" not in p.parts:
            out[rel] = _sha256(p)
    return out


def zoo_bytes(root: str | Path | None = None, exclude: str | None = None) -> int:
    """Bytes of every model file in the zoo (the budget counts these), leaving ``exclude`` out."""
    root = Path(root) if root is not None else zoo_dir()
    return sum(c.bytes for c in cards(root) if c.name != exclude) if root.is_dir() else 0


def add(
    name: str,
    source: str | Path,
    card: dict[str, Any] | Card,
    root: str | Path | None = None,
    include: list[str] | None = None,
    budget: int = BUDGET_BYTES,
) -> Card:
    """Copy a trained model folder into the zoo as ``name`` with its card (files hashed, size checked).

    Args:
        name: zoo name (folder under ``models/``).
        source: the trained folder (its files are copied; ``include`` globs pick a subset, e.g. the model
            without training checkpoints).
        card: the card's fields (``name``, ``files`` and ``bytes`` are filled in here).
        root: the zoo folder (default :func:`zoo_dir`).
        include: glob patterns relative to ``source`` (default: every file except ``checkpoint-*``).
        budget: the zoo's size limit in bytes, all models together.

    Raises:
        ZooError: no such source, or the zoo would exceed ``budget`` (nothing is written then).
    """
    root = Path(root) if root is not None else zoo_dir()
    src = Path(source)
    if not src.is_dir():
        raise ZooError(f"zoo add: {src} is not a folder")
    picked: list[Path] = []
    for pattern in include or ["**/*"]:
        picked += [p for p in src.glob(pattern) if p.is_file()]
    picked = sorted(
        {
            p
            for p in picked
            if not any(part.startswith("checkpoint-") or part == "__pycache__" for part in p.parts)
            and p.relative_to(src).as_posix() not in _META
        }
    )
    if not picked:
        raise ZooError(f"zoo add: no files in {src} (include={include})")
    size = sum(p.stat().st_size for p in picked)
    others = zoo_bytes(root, exclude=name)
    if others + size > budget:
        raise ZooError(
            f"zoo add: {name} is {size / 1e6:.1f} MB and the rest of the zoo {others / 1e6:.1f} MB: over the "
            f"{budget / 1e6:.0f} MB budget (store fewer files, or bf16 weights where its figures hold)"
        )
    fields_ = asdict(card) if isinstance(card, Card) else dict(card)
    fields_.update(name=name)
    fields_.setdefault("added", time.strftime("%Y-%m-%d", time.gmtime()))
    dest = root / name
    staging = root / f".{name}.tmp"
    if staging.exists():
        shutil.rmtree(staging)
    for p in picked:
        target = staging / p.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, target)
    files = _files(staging)
    fields_.update(files=files, bytes=sum((staging / r).stat().st_size for r in files))
    made = Card(**{k: v for k, v in fields_.items() if k in Card.__dataclass_fields__})
    (staging / CARD_FILE).write_text(made.to_json(), encoding="utf-8")
    (staging / README_FILE).write_text(card_markdown(made), encoding="utf-8")
    if dest.exists():
        shutil.rmtree(dest)
    staging.rename(dest)
    _verified.clear()
    return made


def card_from_train_summary(folder: str | Path) -> dict[str, Any]:
    """Card fields read from a ``lynn train lm`` folder's ``lynn_train.json``: seed, steps, CPU minutes,
    the data, and the ``lynn train lm`` command that retrains it (``$DATA`` stands for the data's folder;
    the data commands, description, ``default_for`` and figures are for the caller to add)."""
    summary = json.loads((Path(folder) / "lynn_train.json").read_text(encoding="utf-8"))
    cfg = summary.get("config", {})
    flags = ["--data", "$DATA/" + Path(str(cfg.get("data", "data"))).name, "--out", "$OUT"]
    for key in (
        "size",
        "role",
        "teacher",
        "base",
        "epochs",
        "steps",
        "batch_size",
        "lr",
        "context",
        "vocab_size",
    ):
        value = cfg.get(key)
        if value is not None:
            if key in ("teacher", "base"):
                value = "zoo:" + Path(str(value)).name if value else value
            flags += [f"--{key.replace('_', '-')}", str(value)]
    flags += ["--seed", str(cfg.get("seed", 0)), "--threads", "1", "--no-progress"]
    for key in ("minimal_abi", "compact"):
        if cfg.get(key):
            flags.append(f"--{key.replace('_', '-')}")
    return {
        "kind": f"lm-{summary.get('role', 'target')}",
        "data": f"demonstrations in {cfg.get('data')} ({summary.get('examples')} examples)",
        "commands": ["lynn train lm " + " ".join(flags)],
        "seed": cfg.get("seed"),
        "steps": summary.get("steps"),
        "cpu_minutes": round(float(summary.get("cpu_minutes") or summary.get("minutes") or 0.0), 1),
        "notes": (
            f"{summary.get('parameters', 0) / 1e6:.2f}M parameters, {summary.get('size')} preset, final loss "
            f"{summary.get('final_loss', float('nan')):.3f}"
            + ("; training was stopped by its minutes cap" if summary.get("capped_by_minutes") else "")
        ),
    }


def card_markdown(card: Card) -> str:
    """The card as a Markdown page (``models/NAME/README.md``)."""
    lines = [f"# zoo:{card.name} — {card.kind}", "", card.description, ""]
    if card.default_for:
        lines += [
            "Default for: " + ", ".join(f"`{env}` ({role})" for env, role in card.default_for.items()),
            "",
        ]
    rows = [
        ("seed", card.seed),
        ("steps", card.steps),
        ("CPU minutes", card.cpu_minutes),
        ("measured on", card.machine),
        ("size", f"{card.bytes / 1e6:.2f} MB"),
        ("added", card.added),
    ]
    lines += ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows if v not in (None, "")]
    if card.figures:
        lines += ["", "## Held-out figures", "", "| measure | value |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in card.figures.items()]
        if card.figures_command:
            lines += ["", "```bash", card.figures_command, "```"]
    if card.data:
        lines += ["", "## Data", "", card.data]
    if card.data_commands or card.commands:
        lines += ["", "## Rebuild (`lynn zoo build " + card.name + "`)", "", "```bash"]
        lines += [f"{cmd}   # -> $DATA/{key}" for key, cmd in card.data_commands.items()]
        lines += list(card.commands)
        lines += ["```"]
    if card.notes:
        lines += ["", "## Notes", "", card.notes]
    lines += ["", "## Files (sha256)", ""] + [f"- `{r}` {d}" for r, d in sorted(card.files.items())]
    return "\n".join(lines) + "\n"


def build(
    names: list[str] | None = None,
    root: str | Path | None = None,
    data: str | Path = "build/zoo-data",
    out: str | Path = "build/zoo",
    install: bool = False,
    dry_run: bool = False,
) -> list[dict[str, Any]]:
    """Retrain zoo models from scratch with their cards' commands (``make models``).

    Each card's ``data_commands`` run once per ``$DATA/NAME`` (a ``.done`` stamp; cards share data), then
    its ``commands`` with ``$OUT`` = ``out/NAME`` and ``$DATA`` set, from the repository root; drafts
    (kind ``lm-draft``) after the other models, since they are distilled from the zoo's target. With
    ``install`` the result replaces the zoo's folder (card figures kept; files and sha256 renewed);
    otherwise it stays in ``out/NAME`` to compare first (replace a checkpoint only when it improves).

    Returns:
        One ``{"name", "out", "minutes", "commands"}`` per model.
    """
    root = Path(root) if root is not None else zoo_dir()
    # Drafts last: a draft's command distils the zoo's target (--teacher zoo:evm-lm), which with ``install``
    # is the freshly rebuilt one by then.
    chosen = sorted(
        (c for c in cards(root) if not names or c.name in names), key=lambda c: c.kind == "lm-draft"
    )
    unknown = sorted(set(names or []) - {c.name for c in chosen})
    if unknown:
        raise ZooError(f"no zoo model(s) {unknown}; the zoo has: {', '.join(c.name for c in cards(root))}")
    repo = root.resolve().parent
    data = Path(data).resolve()
    report = []
    for card in chosen:
        target = Path(out).resolve() / card.name
        # The commands name `lynn` and `python`: this interpreter's (the venv's) first on PATH.
        path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        env = {**os.environ, "DATA": str(data), "OUT": str(target), "PATH": path}
        ran: list[str] = []
        started = time.monotonic()
        for key, cmd in card.data_commands.items():
            stamp = data / key / ".done"
            if stamp.exists():
                continue
            ran.append(cmd)
            if not dry_run:
                if (data / key).exists():
                    shutil.rmtree(data / key)  # a partial collection: start it over
                subprocess.run(cmd, shell=True, check=True, cwd=repo, env=env)
                stamp.parent.mkdir(parents=True, exist_ok=True)
                stamp.write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        for cmd in card.commands:
            ran.append(cmd)
            if not dry_run:
                subprocess.run(cmd, shell=True, check=True, cwd=repo, env=env)
        if install and not dry_run:
            add(card.name, target, card, root=root)
        report.append(
            {
                "name": card.name,
                "out": str(target),
                "minutes": (time.monotonic() - started) / 60,
                "commands": ran,
            }
        )
    return report
