"""Benchmarks: one module per measure, behind ``lynn bench NAME`` and the thin ``benchmarks/*.py`` scripts.

A benchmark module has a docstring (``lynn bench NAME -h`` shows it) and two functions:

* ``add_arguments(parser)`` adds its flags to an :class:`argparse.ArgumentParser`;
* ``run(args) -> int`` runs it and prints its table (anchor and ours side by side, with the ratio);
  mistakes in the flags raise :class:`lynn.errors.UsageError`.

:func:`parser_for` builds a module's parser for both ``lynn bench NAME`` and the script's
:func:`main`, so the two take the same flags. Modules import their heavy dependencies (the envs,
agents, comparison libraries) inside ``run`` or at their own top: ``lynn`` imports a benchmark
module only when that benchmark runs. The names ``lynn bench`` offers are the table ``BENCHES`` in
:mod:`lynn.cli`; adding a benchmark is a module here plus one line there.
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

__all__ = ["load", "main", "pyplot", "save_figure", "summary"]


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
