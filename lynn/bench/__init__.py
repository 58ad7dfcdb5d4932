"""Benchmarks: one module per measure, behind ``lynn bench NAME`` and the thin ``benchmarks/*.py`` scripts.

A benchmark module has a docstring (``lynn bench NAME -h`` shows it) and two functions:

* ``add_arguments(parser)`` adds its flags to an :class:`argparse.ArgumentParser`;
* ``run(args) -> int`` runs it and prints its table (anchor and ours side by side, with the ratio);
  mistakes in the flags raise :class:`lynn.errors.UsageError`.

:func:`parser_for` builds a module's parser for both ``lynn bench NAME`` and the script's
:func:`main`, so the two take the same flags. Modules import their heavy dependencies (the envs,
agents, comparison libraries) inside ``run`` or at their own top: ``lynn`` imports a benchmark
module only when that benchmark runs. The names ``lynn bench`` offers are the table :data:`BENCHES`
below; adding a benchmark is a module here plus one line there. :func:`register` adds ``lynn bench``
to the ``lynn`` parser (it is listed in :data:`lynn.cli.COMMANDS`, like every command that lives
beside its code).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from lynn.errors import UsageError

__all__ = ["BENCHES", "cmd_bench", "load", "main", "pyplot", "register", "save_figure", "summary"]

# `lynn bench NAME`: name -> (module with add_arguments(parser) and run(args), one-line help). The module
# is imported only when its benchmark runs; adding a benchmark is one line here.
BENCHES: dict[str, tuple[str, str]] = {
    "coordination": ("lynn.bench.coordination", "routing: LinUCB vs MABWiser LinUCB, VW cb_explore_adf"),
    "coordination_real": (
        "lynn.bench.coordination_real",
        "routing over real EVMQuest executions by real Lynn agents (cached replay)",
    ),
    "liveweb": ("lynn.bench.liveweb", "LiveWeb step/reset latency vs raw Playwright (and BrowserGym)"),
    "specdec": ("lynn.bench.specdec", "speculative decoding vs plain greedy and HF assisted generation"),
    "evm-oracle": ("lynn.bench.evm_oracle", "EVMQuest oracle over every task, per chain backend"),
    "evm-reset": ("lynn.bench.evm_reset", "EVMQuest reset: snapshot revert vs deploy, embedded vs anvil"),
    "evm-sandbox": ("lynn.bench.evm_sandbox", "EVMQuest sandbox per-script cost vs a fresh python process"),
    "echo-broadcast": ("lynn.bench.echo_broadcast", "Echo weight broadcast: one-to-many vs chain"),
    "echo-utilisation": ("lynn.bench.echo_utilisation", "Echo learner utilisation vs the capacity rule"),
    "import": ("lynn.bench.import_time", "`import lynn` cost vs `import gymnasium`"),
    "device": (
        "lynn.bench.device",
        "every GPU-only figure in one run (scripts/device_check.sh; --dry-run: CPU)",
    ),
}


def register(sub: Any) -> None:
    """Add ``lynn bench NAME [FLAGS]`` to the ``lynn`` parser's subcommands ``sub``."""
    p = sub.add_parser("bench", help="run a benchmark: ours and its anchor side by side (tables + plots)")
    names = p.add_subparsers(dest="bench_name", required=True, metavar="NAME")
    for name, (_, help_text) in BENCHES.items():
        # The benchmark's own flags are parsed by its module (cmd_bench), so listing them costs nothing.
        b = names.add_parser(name, help=help_text, add_help=False)
        b.set_defaults(func=cmd_bench, takes_extra_argv=True)


def cmd_bench(args: argparse.Namespace) -> int:
    """``lynn bench NAME [FLAGS]``: the benchmark module parses FLAGS itself (``-h`` lists them)."""
    module_name, _ = BENCHES[args.bench_name]
    module = load(module_name)
    bench_args = parser_for(module, prog=f"lynn bench {args.bench_name}").parse_args(args.extra_argv)
    return int(module.run(bench_args) or 0)


def load(module_name: str) -> ModuleType:
    """Import a benchmark module, checking that it has ``add_arguments`` and ``run``."""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise UsageError(f"no benchmark module {module_name}") from exc
        raise UsageError(f"benchmark {module_name} needs {exc.name}: {exc}") from exc
    missing = [f for f in ("add_arguments", "run") if not callable(getattr(module, f, None))]
    if missing:
        raise UsageError(f"{module_name} is not a benchmark module (no {', '.join(missing)})")
    return module


def summary(module: ModuleType) -> str:
    """The first line of the module's docstring."""
    return (module.__doc__ or module.__name__).strip().splitlines()[0]


def parser_for(module: ModuleType, prog: str | None = None) -> argparse.ArgumentParser:
    """The module's own parser (its flags, its docstring as the description)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=module.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    module.add_arguments(parser)
    return parser


def main(module_name: str, argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Parse ``argv`` with the module's flags and run it; a :class:`UsageError` exits 2 in one line."""
    module = load(module_name)
    parser = parser_for(module, prog)
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        return int(module.run(args) or 0)
    except UsageError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the file-only Agg backend (benchmarks write PNGs, never open windows)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | Path, dpi: int = 120, **layout: Any) -> None:
    """Lay out ``fig``, write it to ``path`` (folders made as needed), close it and say where it went."""
    fig.tight_layout(**layout)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    print(f"plot: {path}")
