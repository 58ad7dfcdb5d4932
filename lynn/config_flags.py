"""Command-line flags built from a config dataclass: one flag per field, never declared twice.

Every ``lynn`` command with options has one config dataclass (``TrainConfig``, ``GRPOTrainConfig``,
``DynaWebConfig``, ``SuiteConfig``, ...); :func:`add_config_flags` gives the command one flag per field and
:func:`config_from_args` builds the instance back, as CleanRL's ``tyro.cli(Args)`` and TRL's
``HfArgumentParser`` do. We keep this small helper of our own rather than either: tyro is not installed,
and ``HfArgumentParser`` would import transformers (seconds) before ``lynn --help`` or ``lynn envs`` could
answer, and names its flags with underscores where ours use dashes. This module is a leaf (standard
library only), so a config module anywhere in the package may use it.

A field's flag:

* ``--field-name`` (underscores become dashes), or ``metadata["flag"]`` (e.g. ``"--env-arg"``), plus
  ``metadata["aliases"]`` (e.g. ``("--groups",)``); ``metadata["positional"]``: a positional argument;
* help from ``metadata["help"]``, else the first sentence of the field's entry in the class docstring's
  ``Attributes:`` section (as tyro reads docstrings), with the default appended;
* ``bool``: ``--name`` / ``--no-name`` (a field already named ``no_*`` gets ``--no-*`` alone);
* ``list[str|int|float]``: comma-separated and repeatable (``--tasks a,b --tasks c``), replacing the
  default; with ``metadata["nargs"] = "+"`` also space-separated (``--data A B``; ``metadata["metavar"]``
  names one value);
* ``dict`` with ``metadata["key_value"]``: repeatable ``KEY=VALUE`` (the value as JSON, else as text);
* ``metadata["parse"]``: a function from the flag's text to the field's value (e.g. ``"3:6"`` -> a list);
* ``int``, ``float``, ``str`` (optionally ``| None``): one value of that type; ``metadata["choices"]``
  limits it;
* anything else (``dict``, ``list[dict]``): one JSON value;
* required when the field has no default or ``metadata["required"]`` is true.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import types
import typing
from typing import Any

__all__ = ["FlagError", "add_config_flags", "config_from_args", "field_flags", "field_help"]

_SCALARS = (int, float, str)


class FlagError(ValueError):
    """A flag's value the config cannot take (a ``KEY=VALUE`` without ``=``, a bad range); the CLI
    prints it as one line, like any other user mistake."""


def _unwrap(hint: Any) -> Any:
    """``X | None`` -> ``X``; anything else unchanged."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return hint


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _attribute_docs(cls: type) -> dict[str, str]:
    """``name -> text`` from the Google-style ``Attributes:`` section of ``cls``'s docstring."""
    lines = (cls.__doc__ or "").expandtabs().splitlines()
    start = next((i + 1 for i, line in enumerate(lines) if line.strip() == "Attributes:"), len(lines))
    out: dict[str, str] = {}
    indent = None
    for line in lines[start:]:
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        indent = depth if indent is None else indent
        if depth < indent:  # the section is over
            break
        entry = re.match(r"\s*(\w+)(?: \([^)]*\))?: (.*)", line) if depth == indent else None
        if entry:
            out[entry.group(1)] = entry.group(2)
        elif out:
            out[next(reversed(out))] += " " + line.strip()
    return out


def _first_sentence(text: str) -> str:
    """Up to the first full stop outside brackets (a docstring entry's details stay in the docstring)."""
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch in "([{") - (ch in ")]}")
        if ch == "." and depth == 0 and (i + 1 == len(text) or text[i + 1] == " "):
            return text[: i + 1]
    return text


def _plain(text: str) -> str:
    """Docstring markup to terminal text: ``:data:`X``` -> X, ````x```` -> x."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"\1", text)
    return text.replace("``", "")


def field_help(cls: type) -> dict[str, str]:
    """Each field's help: ``metadata["help"]``, else its docstring entry's first sentence (or empty)."""
    docs = _attribute_docs(cls)
    return {
        f.name: _plain(f.metadata.get("help") or _first_sentence(docs.get(f.name, "")))
        for f in dataclasses.fields(cls)
    }


def field_flags(f: dataclasses.Field[Any]) -> list[str]:
    """The option strings of field ``f``: ``--field-name`` (or ``metadata["flag"]``) and its
    ``metadata["aliases"]``; none for a positional field."""
    if f.metadata.get("positional"):
        return []
    return [f.metadata.get("flag") or f"--{f.name.replace('_', '-')}", *f.metadata.get("aliases", ())]


class _ListAction(argparse.Action):
    """Comma-separated values, repeatable; the first use replaces the field's default."""

    def __init__(self, *args: Any, item_type: Any = str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.item_type = item_type

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        current = getattr(namespace, self.dest, None)
        items = [] if current is None or current is self.default else list(current)
        for text in values if isinstance(values, list) else [values]:
            items += [self.item_type(v.strip()) for v in str(text).split(",") if v.strip()]
        setattr(namespace, self.dest, items)


class _KeyValueAction(argparse.Action):
    """Repeatable ``KEY=VALUE`` into a dict; the value is JSON when it parses, else the text."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        current = getattr(namespace, self.dest, None)
        out = {} if current is None or current is self.default else dict(current)
        key, sep, raw = str(values).partition("=")
        if not sep or not key:
            raise FlagError(f"{option_string} expects KEY=VALUE, got {values!r}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
        setattr(namespace, self.dest, out)


class _ParseAction(argparse.Action):
    """The flag's text through the field's ``metadata["parse"]`` (its ValueError becomes a FlagError)."""

    def __init__(self, *args: Any, parse: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.parse = parse

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        try:
            setattr(namespace, self.dest, self.parse(values))
        except ValueError as exc:
            raise FlagError(str(exc)) from exc


def add_config_flags(
    parser: argparse.ArgumentParser, cls: type, exclude: typing.Collection[str] = ()
) -> None:
    """Add one flag per field of the config dataclass ``cls`` to ``parser`` (fields in ``exclude`` left out)."""
    hints = typing.get_type_hints(cls)
    helps = field_help(cls)
    for f in dataclasses.fields(cls):
        if f.name in exclude:
            continue
        flags = field_flags(f)
        default = _default(f)
        required = default is dataclasses.MISSING or bool(f.metadata.get("required"))
        text = helps[f.name].replace("%", "%%")
        if not required and default not in (None, "", [], {}):
            text = f"{text.rstrip('.')} (default: %(default)s)".strip()
        kw: dict[str, Any] = {"help": text or None}
        if not flags:  # positional: argparse names it by its dest and requires it
            parser.add_argument(f.name, **kw)
            continue
        kw["dest"] = f.name
        if required:
            kw["required"] = True
        else:
            kw["default"] = default
        hint = _unwrap(hints[f.name])
        if f.metadata.get("parse"):
            parser.add_argument(*flags, action=_ParseAction, parse=f.metadata["parse"], **kw)
        elif f.metadata.get("key_value"):
            parser.add_argument(*flags, action=_KeyValueAction, metavar="KEY=VALUE", **kw)
        elif hint is bool:
            if f.name.startswith("no_"):
                parser.add_argument(*flags, action="store_true", **kw)
            else:
                parser.add_argument(*flags, action=argparse.BooleanOptionalAction, **kw)
        elif typing.get_origin(hint) is list and typing.get_args(hint)[0] in _SCALARS:
            item = typing.get_args(hint)[0]
            nargs = f.metadata.get("nargs")
            parser.add_argument(
                *flags,
                action=_ListAction,
                item_type=item,
                metavar=f.metadata.get("metavar", "A,B,..."),
                nargs=nargs,
                **kw,
            )
        elif hint in _SCALARS:
            parser.add_argument(*flags, type=hint, choices=f.metadata.get("choices"), **kw)
        else:
            parser.add_argument(*flags, type=json.loads, metavar="JSON", **kw)


def config_from_args(cls: type, args: argparse.Namespace, **override: Any) -> Any:
    """An instance of ``cls`` from the flags :func:`add_config_flags` added (``override`` wins; fields
    left out of the parser take their defaults)."""
    kw = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)}
    return cls(**{**kw, **override})
