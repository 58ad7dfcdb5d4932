"""Mutation testing of the code that decides scores, parsing, routing and staleness (`make mutate`).

Runs mutmut 3 once per listed module, each in its own work folder with its own test selection, so
a module's mutants meet only the fast unit tests that cover it (no browser, no anvil). mutmut maps
every test to the functions it calls and runs, per mutant, only the tests that reach the mutated
function. Prints killed/total per module, writes a JSON summary and exits non-zero when a module is
under the threshold.

Usage:
    python scripts/mutate.py                 # every module
    python scripts/mutate.py linucb runner   # some of them
    python scripts/mutate.py --list          # the table below
    python scripts/mutate.py --show linucb   # the surviving mutants of one module, as diffs

Why a driver: mutmut reads one ``[tool.mutmut]`` table from the ``pyproject.toml`` of the folder it
runs in, and its test selection is global. Per module we want another test selection and only some
functions of a file (the checks, not the oracle-script generators), so each module gets a folder
``<workdir>/<module>/`` with links to ``lynn/`` and ``tests/`` and a generated ``pyproject.toml``
(the repository's ``[tool.mutmut]`` table merged with the module's entry below), and ``mutmut run``
is given the module's function globs.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Module:
    """One mutated module.

    Attributes:
        path: the source file, relative to the repository.
        tests: pytest node ids / files that cover it (fast unit tests only).
        functions: fnmatch globs over mutmut's mangled function names (``x_name`` for a function,
            ``xǁClassǁmethod`` for a method); empty = every function of the file.
        threshold: the least killed share that passes.
    """

    path: str
    tests: list[str]
    functions: list[str] = field(default_factory=list)
    threshold: float = 0.90


MODULES: dict[str, Module] = {
    "linucb": Module(
        "lynn/agents/linucb.py",
        [
            "tests/agents/test_linucb_params.py",
            "tests/agents/test_linucb.py::test_sherman_morrison_matches_the_direct_solution",
            "tests/agents/test_linucb.py::test_screening_score_is_the_reference_formula",
            "tests/agents/test_linucb.py::test_delayed_updates_use_the_decisions_that_earned_them",
        ],
    ),
    # The runner without its process-pool / Ray backends and the progress bar (tests/eval/test_runner.py
    # covers those with real worker processes and Ray; docs/mutation.md).
    "runner": Module(
        "lynn/eval/runner.py",
        ["tests/eval/test_runner_identity.py"],
        functions=[
            "xǁEvalConfigǁ*",
            "x_slug",
            "x_run_dir",
            "x_env_class",
            "x_bare_id",
            "x__spec",
            "x_list_tasks",
            "x_plan",
            "x_agent_seed",
            "x__error_text",
            "xǁ_Episodesǁ*",
            "x__run_serial",
            "x_read_records",
            "x_summarize",
            "x_evaluate",
            "x_config_dict",
        ],
    ),
    "evaluators": Module(
        "lynn/envs/liveweb/evaluators.py",
        ["tests/envs/liveweb/test_evaluator_combinations.py", "tests/envs/liveweb/test_evaluators.py"],
    ),
    "actions": Module(
        "lynn/envs/liveweb/actions.py",
        ["tests/envs/liveweb/test_actions.py", "tests/envs/liveweb/test_actions_parser.py"],
    ),
    "echo_core": Module("lynn/wrappers/echo/core.py", ["tests/wrappers/echo/test_echo_buffer_order.py"]),
    # taskkit.py is also the oracle-script builders: mutate the check helpers and the validator's view.
    "evm_checks": Module(
        "lynn/envs/evmquest/taskkit.py",
        ["tests/envs/evmquest/test_checks_unit.py"],
        functions=["x_close", "x_c_*", "xǁCtxǁ*", "xǁTxRecordǁ*"],
    ),
    # atomic.py is also the task bank's oracle scripts and chain set-ups: mutate the checks.
    "evm_atomic": Module(
        "lynn/envs/evmquest/atomic.py",
        ["tests/envs/evmquest/test_checks_unit.py"],
        functions=["x__*_checks", "x__percent_of_native"],
    ),
    # composites.py: its check helpers and validators (the rest writes oracle scripts and reads the chain).
    "composites": Module(
        "lynn/envs/evmquest/composites.py",
        ["tests/envs/evmquest/test_checks_unit.py"],
        functions=["x_c_*", "x_calls", "x_swaps_value", "x_fees", "x__*_checks"],
    ),
    # scoring.py: the episode score of each profile (the rest needs a chain; tests/envs/evmquest/test_env.py).
    "evm_scoring": Module(
        "lynn/envs/evmquest/scoring.py",
        ["tests/envs/evmquest/test_checks_unit.py"],
        functions=["xǁDefaultScoringǁscore", "xǁReferenceScoringǁscore"],
    ),
}


def _mutmut_table(mod: Module) -> dict:
    base = tomllib.loads((REPO / "pyproject.toml").read_text())
    table = dict(base.get("tool", {}).get("mutmut", {}))
    table["source_paths"] = ["lynn"]
    table["only_mutate"] = [mod.path]
    table["pytest_add_cli_args_test_selection"] = list(mod.tests)
    return table


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} as TOML")


def _pyproject(mod: Module) -> str:
    base = tomllib.loads((REPO / "pyproject.toml").read_text())
    pytest_ini = dict(base["tool"]["pytest"]["ini_options"])
    pytest_ini.pop("testpaths", None)
    lines = ["[tool.mutmut]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in _mutmut_table(mod).items()]
    lines += ["", "[tool.pytest.ini_options]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in pytest_ini.items()]
    return "\n".join(lines) + "\n"


def prepare(name: str, mod: Module, workdir: Path, fresh: bool) -> Path:
    """The module's work folder: links to the sources and tests plus its pyproject.toml."""
    d = workdir / name
    if fresh and d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True, exist_ok=True)
    for part in ("lynn", "tests"):
        link = d / part
        if not link.exists():
            link.symlink_to(REPO / part)
    (d / "pyproject.toml").write_text(_pyproject(mod))
    return d


def _meta(d: Path, mod: Module) -> dict[str, int]:
    meta = d / "mutants" / (mod.path + ".meta")
    if not meta.exists():
        return {}
    return json.loads(meta.read_text())["exit_code_by_key"]


def _selected(mod: Module, names: list[str]) -> list[str]:
    if not mod.functions:
        return names
    prefix = mod.path[:-3].replace("/", ".") + "."
    out = []
    for n in names:
        func = n[len(prefix) :].rsplit("__mutmut_", 1)[0]
        if any(fnmatch.fnmatchcase(func, g) for g in mod.functions):
            out.append(n)
    return out


KILLED = {"killed", "timeout", "caught by type check"}  # mutmut's statuses that count as a kill


def status(code: int | None) -> str:
    """mutmut's name for a mutant's exit code."""
    from mutmut.stats import status_by_exit_code

    return status_by_exit_code[code]


def run_module(
    name: str, mod: Module, workdir: Path, fresh: bool, jobs: int, survivors: bool = False
) -> dict:
    d = prepare(name, mod, workdir, fresh and not survivors)
    prefix = mod.path[:-3].replace("/", ".") + "."
    globs = [prefix + g + "__mutmut_*" for g in mod.functions] or [prefix + "*"]
    if survivors:
        # Only the mutants that survived the last run, against the current tests (the source file is
        # unchanged, so earlier kills stand); the test-to-function map is collected afresh.
        codes = _meta(d, mod)
        globs = [k for k in _selected(mod, sorted(codes)) if status(codes[k]) not in KILLED]
        (d / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
        if not globs:
            globs = [prefix + "nothing_left"]
    env = dict(os.environ, LYNN_TORCH_THREADS="1", OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    mutmut = [sys.executable, "-m", "mutmut"]
    t0 = time.monotonic()
    log = d / "mutmut.log"
    with log.open("w") as fh:
        proc = subprocess.run(
            [*mutmut, "run", "--max-children", str(jobs), *globs],
            cwd=d,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    seconds = time.monotonic() - t0
    codes = _meta(d, mod)
    keys = _selected(mod, sorted(codes))
    killed = [k for k in keys if status(codes[k]) in KILLED]
    survived = [k for k in keys if status(codes[k]) not in KILLED]
    total = len(keys)
    return {
        "module": name,
        "path": mod.path,
        "tests": mod.tests,
        "functions": mod.functions,
        "killed": len(killed),
        "total": total,
        "score": (len(killed) / total) if total else 0.0,
        "timeouts": sum(status(codes[k]) == "timeout" for k in keys),
        "survived": {k: status(codes[k]) for k in survived},
        "seconds": round(seconds, 1),
        "mutmut_rc": proc.returncode,
        "log": str(log),
        "threshold": mod.threshold,
    }


def show(name: str, workdir: Path) -> None:
    d = workdir / name
    mod = MODULES[name]
    codes = _meta(d, mod)
    for k in _selected(mod, sorted(codes)):
        if status(codes[k]) not in KILLED:
            subprocess.run([sys.executable, "-m", "mutmut", "show", k], cwd=d)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="*", help=f"some of {sorted(MODULES)} (default: all)")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "lynn-mutate")
    ap.add_argument("--out", type=Path, default=REPO / "results" / "mutation.json")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--keep", action="store_true", help="reuse the work folders (mutmut's own caching)")
    ap.add_argument(
        "--survivors",
        action="store_true",
        help="re-run only the last run's surviving mutants (after new tests)",
    )
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--show", metavar="MODULE")
    args = ap.parse_args(argv)
    if args.list:
        for n, m in MODULES.items():
            print(f"{n:12s} {m.path:40s} {' '.join(m.tests)}  {' '.join(m.functions)}")
        return 0
    if args.show:
        show(args.show, args.workdir)
        return 0
    unknown = sorted(set(args.modules) - set(MODULES))
    if unknown:
        ap.error(f"unknown module(s) {unknown}; choose from {sorted(MODULES)}")
    rows = []
    for name in args.modules or list(MODULES):
        row = run_module(name, MODULES[name], args.workdir, not args.keep, args.jobs, args.survivors)
        rows.append(row)
        ok = "ok" if row["score"] >= row["threshold"] else "UNDER"
        print(
            f"{name:12s} killed {row['killed']:4d}/{row['total']:<4d} {100 * row['score']:5.1f}%  "
            f"{row['seconds']:6.0f}s  {ok}",
            flush=True,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2))
    print(f"summary: {args.out}")
    bad = [r["module"] for r in rows if r["score"] < r["threshold"]]
    if bad:
        print(f"under the threshold: {bad} (see `python scripts/mutate.py --show MODULE`)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
