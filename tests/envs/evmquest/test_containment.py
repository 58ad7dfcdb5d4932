"""The containment layer shared by the Python and TypeScript script runners (no chain needed)."""

from __future__ import annotations

import os
import socket

import pytest

from lynn.envs.evmquest import containment
from lynn.envs.evmquest.sandbox import Sandbox


def test_framing_round_trips_messages_and_descriptors() -> None:
    a, b = socket.socketpair()
    r, w = os.pipe()
    try:
        containment.send_msg(a, {"job": "x" * 70_000, "n": [1, 2]}, fds=[r])
        msg, fds = containment.recv_msg(b, with_fds=True)
        assert msg == {"job": "x" * 70_000, "n": [1, 2]} and len(fds) == 1
        os.write(w, b"ok")
        assert os.read(fds[0], 2) == b"ok"  # the descriptor crossed the channel
        os.close(fds[0])
        containment.send_msg(a, {"pid": 7})
        assert containment.recv_msg(b) == ({"pid": 7}, [])
        a.close()
        with pytest.raises(EOFError):
            containment.recv_msg(b)
    finally:
        for s in (a, b):
            s.close()
        os.close(r)
        os.close(w)


def test_both_runners_share_one_layer() -> None:
    assert issubclass(Sandbox, containment.ScriptSandbox)
    from lynn.envs.evmquest.typescript import TypeScriptSandbox  # imports without Bun installed

    assert issubclass(TypeScriptSandbox, containment.ScriptSandbox)
    assert Sandbox.server_module != TypeScriptSandbox.server_module
    assert containment.oom_count(None) == 0  # no cgroup: never an out-of-memory kill to name
    assert {"socket", "fork", "ptrace", "mount"} <= set(containment.DENIED_SYSCALLS)
