"""Exceptions shared by the layers: defined here, below everything, so that any module may raise them.

An env or benchmark module that validates a command's input raises :class:`UsageError` from here;
``lynn`` (:mod:`lynn.cli`) reports it as one ``lynn: error: ...`` line with exit code 2.
"""

from __future__ import annotations

__all__ = ["UsageError"]


class UsageError(Exception):
    """A mistake in how a command was called; reported in one line with exit code 2."""
