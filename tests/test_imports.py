"""The house rules of DESIGN.md as tests: the import graph points down, ``import lynn`` stays light.

The graph is grimp's (every ``import`` statement of every module under ``lynn/``, including those
inside functions; ``if TYPE_CHECKING:`` blocks excluded). A contract forbids any chain of imports,
direct or through other modules, from a layer to the layers above it.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO, run_python

grimp = pytest.importorskip("grimp", reason="grimp is in the dev extra: pip install -e '.[dev]'")

ENV_LAYERS_ABOVE = ["agents", "cli", "eval", "wrappers", "bench", "suite", "__main__"]

# (importer, forbidden, why): every name is relative to the top package (``lynn``).
CONTRACTS: list[tuple[str, list[str], str]] = [
    (
        "envs",
        ENV_LAYERS_ABOVE,
        "envs/ never import agents/, cli, eval/, wrappers/ or bench/ (models: lynn.lm)",
    ),
    (
        "lm",
        ["agents", "envs", "cli", "eval", "wrappers", "bench", "suite", "__main__"],
        "lm/ is shared by envs and agents",
    ),
    (
        "eval",
        ["envs", "wrappers", "cli", "bench", "suite", "__main__"],
        "eval/ drives env -> agent -> env; it imports no env module and not the wrappers",
    ),
    (
        "wrappers",
        ["agents", "envs", "lm", "eval", "cli", "bench", "suite", "__main__"],
        "wrappers/ (Echo) wrap any env and stand alone, as gymnasium.vector does: no env, agent, model, "
        "eval or CLI module; trainers that drive Echo live beside their loss in agents/",
    ),
    (
        "agents",
        ["cli", "eval", "bench", "suite", "__main__"],
        "agents act in envs; the runners drive them (their trainers may drive workers with Echo)",
    ),
    (
        "registry",
        ["envs", "agents", "cli", "eval", "wrappers", "bench", "lm", "suite"],
        "entry points are strings",
    ),
    ("suite", ["cli", "bench", "__main__"], "lynn/suite (the make-run job) sits under the CLI only"),
    (
        "zoo",
        [
            "envs",
            "agents",
            "cli",
            "eval",
            "wrappers",
            "bench",
            "lm",
            "suite",
            "registry",
            "system",
            "__main__",
        ],
        "lynn.zoo is a leaf (standard library and lynn.errors): every layer resolves zoo names",
    ),
    ("system", ["*"], "lynn.system is a leaf (standard library only)"),
    ("config_flags", ["*"], "lynn.config_flags is a leaf: any config module builds its flags with it"),
    ("errors", ["*"], "lynn.errors is a leaf"),
    ("records", ["*"], "lynn.records is a leaf: the typed records every layer reads and writes"),
    ("raytools", ["*"], "lynn.raytools is a leaf"),
]


def violations(package: str, contracts: list[tuple[str, list[str], str]]) -> list[str]:
    """Every forbidden import chain in ``package``, one readable line each (empty: the graph is clean)."""
    graph = grimp.build_graph(package, cache_dir=None, exclude_type_checking_imports=True)
    tops = sorted({m.split(".")[1] for m in graph.modules if m.count(".") >= 1})
    out = []
    for importer, forbidden, why in contracts:
        if importer not in tops:
            continue
        targets = [t for t in tops if t != importer] if forbidden == ["*"] else forbidden
        for target in targets:
            if target not in tops:
                continue
            for chain in sorted(graph.find_shortest_chains(f"{package}.{importer}", f"{package}.{target}")):
                out.append(f"{' -> '.join(chain)}  ({why})")
    return out


@pytest.fixture(scope="module")
def graph() -> object:
    return grimp.build_graph("lynn", cache_dir=None, exclude_type_checking_imports=True)


def test_the_graph_is_the_source_tree(graph: object) -> None:
    import lynn

    assert Path(lynn.__file__).resolve().parent == REPO / "lynn"
    modules = graph.modules  # type: ignore[attr-defined]
    for m in ("lynn.envs.evmquest.chain", "lynn.envs.liveweb.browser", "lynn.cli", "lynn.eval.runner"):
        assert m in modules
    assert len(modules) > 40


@pytest.mark.parametrize("contract", CONTRACTS, ids=[c[0] for c in CONTRACTS])
def test_import_contract(contract: tuple[str, list[str], str]) -> None:
    bad = violations("lynn", [contract])
    assert not bad, "forbidden imports:\n" + "\n".join(bad)


def test_only_the_entry_points_import_the_cli_and_only_the_cli_imports_bench(graph: object) -> None:
    g = graph
    cli_importers = g.find_modules_that_directly_import("lynn.cli")  # type: ignore[attr-defined]
    assert cli_importers <= {"lynn.__main__"}, cli_importers
    bench_modules = {m for m in g.modules if m == "lynn.bench" or m.startswith("lynn.bench.")}  # type: ignore[attr-defined]
    for m in bench_modules:
        importers = g.find_modules_that_directly_import(m)  # type: ignore[attr-defined]
        assert importers <= bench_modules | {"lynn.cli"}, (m, importers)


def test_only_the_cli_imports_the_suite(graph: object) -> None:
    g = graph
    suite = {m for m in g.modules if m == "lynn.suite" or m.startswith("lynn.suite.")}  # type: ignore[attr-defined]
    assert "lynn.suite.run" in suite
    for m in suite:
        importers = g.find_modules_that_directly_import(m)  # type: ignore[attr-defined]
        assert importers <= suite | {"lynn.cli"}, (m, importers)


def test_no_module_names_a_higher_floor_in_a_string_default() -> None:
    # A "module:callable" default is an import too, hidden from the graph: the real pool's default
    # workers once reached up into lynn.bench this way.
    for path in (REPO / "lynn" / "envs").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for floor in ("lynn.bench", "lynn.eval", "lynn.cli", "lynn.suite", "lynn.wrappers"):
            assert f'"{floor}.' not in text and f"'{floor}." not in text, (path, floor)


def test_a_wrong_way_import_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A miniature house with an env that imports the CLI inside a function (as lynn.envs once did)
    # and an eval module that reaches an env through a helper: both must be reported.
    root = tmp_path / "minihouse"
    files = {
        "__init__.py": "",
        "cli.py": "UsageError = Exception\n",
        "helpers.py": "from minihouse.envs import web\n",
        "envs/__init__.py": "",
        "envs/web.py": "def find():\n    from minihouse.cli import UsageError\n    return UsageError\n",
        "eval/__init__.py": "",
        "eval/runner.py": "import minihouse.helpers\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    contracts = [("envs", ENV_LAYERS_ABOVE, "e"), ("eval", ["envs"], "v")]
    assert violations("minihouse", contracts) == [
        "minihouse.envs.web -> minihouse.cli  (e)",
        "minihouse.eval.runner -> minihouse.helpers -> minihouse.envs.web  (v)",
    ]


# --- `import lynn` -------------------------------------------------------------------------------
HEAVY = ["torch", "transformers", "web3", "playwright", "ray", "matplotlib", "stable_baselines3"]
LYNN_ABOVE = ["lynn.agents", "lynn.eval", "lynn.wrappers", "lynn.lm", "lynn.bench", "lynn.cli", "lynn.envs"]


def test_import_lynn_is_light_and_subpackages_load_on_first_use() -> None:
    code = textwrap.dedent(
        f"""
        import json, sys
        import lynn
        before = sorted(m for m in {HEAVY + LYNN_ABOVE!r} if m in sys.modules)
        listed = sorted(n for n in ("agents", "eval", "lm", "wrappers", "bench", "envs") if n in dir(lynn))
        make_agent = lynn.agents.make_agent
        after = [m for m in ("lynn.agents", "lynn.eval", "lynn.envs") if m in sys.modules]
        sub = (lynn.eval.__name__, lynn.lm.__name__, lynn.wrappers.__name__, lynn.bench.__name__)
        try:
            lynn.no_such_thing
            missing = "no error"
        except AttributeError as exc:
            missing = str(exc)
        print(json.dumps([before, listed, make_agent.__module__, after, sub, missing]))
        """
    )
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    before, listed, agent_module, after, sub, missing = json.loads(proc.stdout.strip().splitlines()[-1])
    assert before == [], f"`import lynn` imported {before}"
    assert listed == ["agents", "bench", "envs", "eval", "lm", "wrappers"]
    assert agent_module == "lynn.agents" and after == ["lynn.agents"]
    assert sub == ["lynn.eval", "lynn.lm", "lynn.wrappers", "lynn.bench"]
    assert missing == "module 'lynn' has no attribute 'no_such_thing'"


def test_gym_make_by_id_string_still_works_without_import() -> None:
    proc = run_python(
        "import gymnasium as gym\n"
        "env = gym.make('lynn:Lynn/Coordination-v0')\n"
        "import lynn, sys\n"
        "print(type(env.unwrapped).__name__, 'lynn.agents' in sys.modules)"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["CoordinationEnv", "False"]


# --- one place finds external programs ------------------------------------------------------------
# Modules still doing their own lookup, each with the reason; remove the entry when it switches.
OWN_LOOKUP_PENDING: dict[str, str] = {}
LOOKUP = re.compile(
    r"shutil\.which\(|environ(?:\.get)?[(\[]\s*['\"]LYNN_(?:CHROMIUM|ANVIL|NODE|SOLC|TRANSFORMERS|NODE_MODULES)"
)


def test_only_lynn_system_looks_up_external_programs() -> None:
    offenders = []
    for path in sorted((REPO / "lynn").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel == "lynn/system.py" or rel in OWN_LOOKUP_PENDING:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if LOOKUP.search(line):
                offenders.append(f"{rel}:{number}: {line.strip()}")
    assert not offenders, "use lynn.system.find(NAME) instead:\n" + "\n".join(offenders)
    for rel in OWN_LOOKUP_PENDING:  # the list shrinks: a fixed module must leave it
        assert LOOKUP.search((REPO / rel).read_text(encoding="utf-8")), (
            f"{rel} is fixed: drop it from the list"
        )
