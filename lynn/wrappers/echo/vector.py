"""``EchoVectorEnv``: a process-per-env vector env with an EnvPool-style asynchronous API.

Gymnasium's ``AsyncVectorEnv.step`` waits for *every* sub-env, so one slow env (a browser step, a
chain transaction, a long-tailed tool call) stalls the whole batch. ``EchoVectorEnv`` adds EnvPool's
``send(actions, env_ids)`` / ``recv()`` pair: ``recv`` returns as soon as ``batch_size`` envs are
ready, with their ids in ``info["env_id"]`` (mask ``info["_env_id"]``), and the stragglers keep
running in the background::

    envs = EchoVectorEnv([lambda: gym.make("CartPole-v1")] * 8, batch_size=4)
    envs.async_reset(seed=0)
    while True:
        obs, reward, terminated, truncated, info = envs.recv()
        envs.send(policy(obs), info["env_id"])

The synchronous ``gymnasium.vector.VectorEnv`` API is the one ``AsyncVectorEnv`` has: ``reset``,
``step``, ``reset_async``/``reset_wait(timeout=)``, ``step_async``/``step_wait(timeout=)``,
``call``, ``get_attr``, ``set_attr``, ``render``, ``np_random_seed``, ``close(timeout=,
terminate=)``, ``ClosedEnvironmentError`` after ``close``, the same infos (``step``/``reset`` add no
key of their own), the same ``AlreadyPendingCallError``/``NoAsyncCallError`` rules and the same
space check at construction (the error names the mismatched env; it is a ``ValueError`` and, like
Gymnasium's, a ``RuntimeError``). ``tests/wrappers/echo/test_echo_conformance.py`` runs each of these
claims against ``AsyncVectorEnv`` too.

**Autoreset.** ``autoreset_mode`` is ``SAME_STEP`` (the default here: the worker resets a finished
env at once; ``info["final_obs"]``/``info["final_info"]`` hold the finished episode's end) or
``NEXT_STEP`` (Gymnasium's default: the step after a done is a reset step with reward 0) or
``DISABLED`` (no autoreset: ``reset(options={"reset_mask": mask})`` resets the envs where the
boolean array ``mask`` is True; the others keep their observation and report an empty info, as in
``AsyncVectorEnv``; the mask works in the other modes too).

**Observations** travel through shared memory space by space: every part whose space Gymnasium
can lay out in shared memory (Box, Discrete, MultiDiscrete, MultiBinary, Text of at most 4096
characters, OneOf, and Dict/Tuple of them) goes there; any other part (Graph, Sequence, custom
spaces such as the envs' ``UnicodeText``, and ``Text`` subclasses, which may accept characters
outside their charset) is pickled through the pipe. So
a ``Dict`` of a big ``Box`` screenshot and free text sends the screenshot through shared memory
and only the text through the pipe. ``shared_memory=False`` pickles everything.

**Failures.** By default (``on_error="raise"``), as in Gymnasium, an exception raised by an env is
re-raised in the main process with its own type (the worker's traceback is attached as a note), a
worker that dies raises :class:`EchoWorkerError`, and an env that runs past ``timeout`` seconds is
killed and raises :class:`EchoTimeoutError` (a ``TimeoutError`` and a
``multiprocessing.TimeoutError``). The failed env's worker is stopped; ``reset()`` starts a new one.
With ``on_error="restart"`` (long runs) a failed env is instead restarted in a fresh worker and
reset, up to ``max_restarts`` restarts in total (then :class:`EchoWorkerError`); each restart is
logged (logger ``lynn.wrappers.echo.vector``) and reported in that row's info as
``info["error"]`` (what happened) and ``info["worker_restarted"]``, with no other env disturbed:

- a failed step ends the episode as ``truncated`` (reward 0) and, in ``SAME_STEP`` mode,
  ``final_obs`` is the last observation the episode really had (the bootstrap target), not the
  new episode's first one; in ``NEXT_STEP`` mode the row's observation is that last observation
  and the next step is the reset step;
- a real termination or truncation whose autoreset then fails keeps its reward, its
  ``terminated``/``truncated`` flags and its final observation and info;
- a failed reset is retried in a fresh worker with the same seed.

``timeout`` (seconds, default ``None``: wait for ever) bounds how long one env's ``reset`` or
``step`` may run, measured from when it was sent or from the call that waits for it, whichever is
later; ``recv``, ``step_wait``, ``reset_wait`` take a per-call ``timeout`` too. ``close()`` never
blocks for ever: envs still busy after ``timeout`` (default 10 s) are stopped (SIGTERM, which lets
the worker close its env, then SIGKILL of the worker's process group, so that helper processes
a hung env started go too). Workers also exit when the main process dies without closing them
(killed, crashed): on Linux by ``PR_SET_PDEATHSIG``, elsewhere when their pipe reaches EOF.

**Documented differences from AsyncVectorEnv**, beyond the extras above: ``observation_space`` is
batched for ``num_envs`` rows (what ``step``/``reset`` return); ``recv()`` returns
``batch_size`` rows, whose space is ``recv_observation_space``. Gymnasium's vector wrappers do not
forward ``send``/``recv``; :class:`EchoRecordEpisodeStatistics` is ``RecordEpisodeStatistics``
with ``send``/``recv``/``async_reset`` too. ``close()`` kills envs still busy after its timeout
instead of waiting for ever. ``reset()`` after ``send()`` discards the results in flight.
``record_step_seconds=True`` adds ``info["step_seconds"]``, the wall time of each env's step.
As in AsyncVectorEnv, ``close()`` with a ``step_async``/``reset_async`` pending warns
("Calling `close` while waiting for a pending call to ..."), and an env error in ``step``/``reset``
emits its warnings (gymnasium's logger: "Received the following error from Worker-i - Shutting it
down", the worker's traceback, then "Raising the last exception back to the main process.") after
every env was read. Where AsyncVectorEnv (Gymnasium 1.4) falls short, ours does not follow it: its shared-memory
``Text``/``OneOf`` observations are the buffer as decoded at construction, on every step (ours are
read afresh); a failed ``call``/``get_attr`` or a failing ``env_fn`` stops its workers or shows up
as ``EOFError`` (ours re-raises the error and keeps the workers serving).
"""

from __future__ import annotations

import copy
import logging
import multiprocessing as mp
import os
import pickle
import signal
import sys
import time
import traceback
import weakref
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any, SupportsFloat, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.error import (
    AlreadyPendingCallError,
    ClosedEnvironmentError,
    CustomSpaceError,
    NoAsyncCallError,
)
from gymnasium.spaces.utils import is_space_dtype_shape_equiv
from gymnasium.vector.utils import (
    CloudpickleWrapper,
    batch_differing_spaces,
    batch_space,
    concatenate,
    create_empty_array,
    create_shared_memory,
    iterate,
    read_from_shared_memory,
    write_to_shared_memory,
)
from gymnasium.vector.vector_env import AutoresetMode
from gymnasium.wrappers.vector import RecordEpisodeStatistics

from lynn.wrappers.echo.pipes import wait_pipes

__all__ = [
    "EchoRecordEpisodeStatistics",
    "EchoSpaceError",
    "EchoTimeoutError",
    "EchoVectorEnv",
    "EchoWorkerError",
]

logger = logging.getLogger(__name__)

ON_ERROR = ("raise", "restart")
_CLOSE_GRACE_S = 10.0  # how long close() lets busy envs finish when no timeout is given
_KILL_GRACE_S = 2.0  # SIGTERM -> SIGKILL
_SHM_TEXT_MAX = 4096  # longer Text spaces are pickled (shared memory decodes max_length per read)


class EchoWorkerError(RuntimeError):
    """An env's worker died, hung, or exhausted the restart budget (``env_id`` says which)."""

    def __init__(self, message: str, env_id: int | None = None) -> None:
        super().__init__(message)
        self.env_id = env_id


class EchoTimeoutError(mp.TimeoutError, TimeoutError):
    """An env ran past its timeout; its worker was killed. Both kinds of ``TimeoutError``."""


class EchoSpaceError(ValueError, RuntimeError):
    """A sub-env's spaces differ from env 0's (``ValueError``; ``RuntimeError`` as in Gymnasium)."""


# --- observation layout: shared memory per space, pickling for the rest -------------------------
# A layout node is ("D", {key: node}) for Dict, ("T", (node, ...)) for Tuple, ("S", shared array)
# for a part that lives in shared memory and ("P", None) for a part pickled through the pipe.
def _build_layout(space: spaces.Space, n: int, ctx: Any, shared: bool) -> tuple[str, Any]:
    if not shared:
        return ("P", None)
    if isinstance(space, spaces.Dict):
        return ("D", {k: _build_layout(s, n, ctx, shared) for k, s in space.spaces.items()})
    if isinstance(space, spaces.Tuple):
        return ("T", tuple(_build_layout(s, n, ctx, shared) for s in space.spaces))
    if isinstance(space, spaces.Text) and (
        type(space) is not spaces.Text or space.max_length > _SHM_TEXT_MAX
    ):
        # A Text subclass may accept characters outside its charset, which the shared layout (charset
        # indices) cannot hold; and a long max_length is decoded in full on every read.
        return ("P", None)
    try:
        return ("S", create_shared_memory(space, n=n, ctx=ctx))
    except (CustomSpaceError, TypeError, ValueError, NotImplementedError):
        return ("P", None)


def _layout_kinds(node: tuple[str, Any]) -> set[str]:
    kind, data = node
    if kind == "D":
        return set().union(*(_layout_kinds(c) for c in data.values())) if data else set()
    if kind == "T":
        return set().union(*(_layout_kinds(c) for c in data)) if data else set()
    return {kind}


def _emit(space: spaces.Space, node: tuple[str, Any], obs: Any, index: int) -> Any:
    """Write the shared parts of ``obs`` (worker side); return the parts to pickle."""
    kind, data = node
    if kind == "P":
        return obs
    if kind == "S":
        write_to_shared_memory(space, index, obs, data)
        return None
    if kind == "D":
        return {k: _emit(cast(spaces.Dict, space)[k], child, obs[k], index) for k, child in data.items()}
    return tuple(_emit(cast(spaces.Tuple, space)[j], child, obs[j], index) for j, child in enumerate(data))


def _views(space: spaces.Space, node: tuple[str, Any], n: int) -> Any:
    """Parent-side numpy views of the shared arrays (None where a part must be decoded per read)."""
    kind, data = node
    if kind == "D":
        return {k: _views(cast(spaces.Dict, space)[k], c, n) for k, c in data.items()}
    if kind == "T":
        return tuple(_views(cast(spaces.Tuple, space)[j], c, n) for j, c in enumerate(data))
    if kind == "S":
        view = read_from_shared_memory(space, data, n=n)
        return view if isinstance(view, np.ndarray) else None
    return None


def _sub(rems: list[Any], key: Any) -> list[Any]:
    return [None if r is None else r[key] for r in rems]


def _row0(node: tuple[str, Any], batch: Any) -> Any:
    """Row 0 of a batch of one observation, as a single observation."""
    kind, data = node
    if kind == "D":
        return {k: _row0(c, batch[k]) for k, c in data.items()}
    if kind == "T":
        return tuple(_row0(c, batch[j]) for j, c in enumerate(data))
    return batch[0]


# --- the worker process ---------------------------------------------------------------------------
def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through `finally`, so the env is closed


def _die_with_parent() -> None:
    """Linux: SIGTERM this worker when the process that started it dies (even by SIGKILL)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass  # the pipe's EOF still ends an idle worker


def _error_payload(exc: BaseException, phase: str, partial: Any = None) -> dict[str, Any]:
    try:
        blob: bytes | None = pickle.dumps(exc)
    except Exception:
        blob = None
    return {
        "phase": phase,
        "type": type(exc).__name__,
        "message": str(exc),
        "traceback": traceback.format_exc(),
        "exc": blob,
        "partial": partial,
    }


def _worker(
    index: int,
    env_fn: CloudpickleWrapper,
    pipe: Connection,
    parent_pipe: Connection,
    layout: tuple[str, Any],
    autoreset_mode: AutoresetMode,
    record_seconds: bool,
    inherited: Sequence[Connection] = (),
) -> None:
    """Own one env; answer (command, payload) messages until told to close.

    Replies are ``("ok", result)``, ``("env_error", payload)`` (the env raised in ``reset``/
    ``step``; the parent decides whether this worker lives on) or ``("call_error", payload)``.
    """
    parent_pipe.close()
    for conn in inherited:  # fork: the other workers' parent ends, or their EOF would never come
        conn.close()
    try:
        os.setpgid(0, 0)  # a group of its own: a hung worker is killed with what it started
    except OSError:
        pass
    _die_with_parent()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's; it closes the workers
    env: gym.Env | None = None
    try:
        make_error = None
        try:
            env = env_fn()
        except Exception as exc:
            make_error = _error_payload(exc, "make")
        needs_reset = False
        last_obs: Any = None
        while True:
            command, payload = pipe.recv()
            if command == "close":
                pipe.send(("ok", None))
                break
            if env is None:
                pipe.send(("env_error", make_error))
                continue
            space = env.observation_space
            if command == "reset":
                try:
                    seed, options = payload
                    obs, info = env.reset(seed=seed, options=options)
                    rem = _emit(space, layout, obs, index)
                except Exception as exc:
                    pipe.send(("env_error", _error_payload(exc, "reset")))
                    continue
                needs_reset, last_obs = False, obs
                pipe.send(("ok", (rem, 0.0, False, False, info)))
            elif command == "reset-noop":  # left out of a reset_mask: its last observation, no info
                pipe.send(("ok", (_emit(space, layout, last_obs, index), 0.0, False, False, {})))
            elif command == "step":
                t = time.perf_counter()
                phase, partial = "step", None
                reward: SupportsFloat
                try:
                    if autoreset_mode == AutoresetMode.NEXT_STEP and needs_reset:
                        phase = "autoreset"
                        obs, info = env.reset()
                        reward, terminated, truncated = 0.0, False, False
                    else:
                        obs, reward, terminated, truncated, info = env.step(payload)
                        terminated, truncated = bool(terminated), bool(truncated)
                        if autoreset_mode == AutoresetMode.SAME_STEP and (terminated or truncated):
                            phase, partial = "autoreset", (obs, reward, terminated, truncated, info)
                            reset_obs, reset_info = env.reset()
                            info = {"final_info": info, "final_obs": obs, **reset_info}
                            obs = reset_obs
                    rem = _emit(space, layout, obs, index)
                except Exception as exc:
                    pipe.send(("env_error", _error_payload(exc, phase, partial)))
                    continue
                needs_reset, last_obs = bool(terminated or truncated), obs
                if record_seconds:
                    info = {**info, "step_seconds": time.perf_counter() - t}
                pipe.send(("ok", (rem, reward, terminated, truncated, info)))
            elif command == "check_spaces":
                mode, obs_space, act_space = payload
                same_obs = (
                    obs_space == env.observation_space
                    if mode == "same"
                    else is_space_dtype_shape_equiv(obs_space, env.observation_space)
                )
                pipe.send(
                    (
                        "ok",
                        (
                            bool(same_obs),
                            bool(act_space == env.action_space),
                            repr(env.observation_space),
                            repr(env.action_space),
                        ),
                    )
                )
            elif command in ("call", "apply", "setattr"):
                # Errors here are the caller's (a missing attribute): answer and keep serving.
                try:
                    if command == "call":
                        name, args, kwargs = payload
                        attr = env.get_wrapper_attr(name)
                        result = attr(*args, **kwargs) if callable(attr) else attr
                    elif command == "apply":
                        fn, args = payload
                        result = fn.fn(env, *args)
                    else:
                        name, value = payload
                        env.set_wrapper_attr(name, value)
                        result = None
                except Exception as exc:
                    pipe.send(("call_error", _error_payload(exc, command)))
                else:
                    pipe.send(("ok", result))
            else:
                pipe.send(("call_error", _error_payload(ValueError(f"unknown command {command!r}"), command)))
    except (KeyboardInterrupt, EOFError, BrokenPipeError, ConnectionResetError):
        pass
    finally:
        if env is not None:
            try:
                env.close()
            except Exception:
                pass
        pipe.close()


class _Gone(Exception):
    """Internal: a worker's pipe broke or it did not answer in time."""

    def __init__(self, reason: str, hung: bool = False) -> None:
        super().__init__(reason)
        self.hung = hung


def _load_exc(error: dict[str, Any] | None) -> BaseException | None:
    if not error or error.get("exc") is None:
        return None
    try:
        exc = pickle.loads(error["exc"])
    except Exception:
        return None
    return exc if isinstance(exc, BaseException) else None


def _kill(proc: Any, grace: float) -> None:
    """SIGTERM (the worker closes its env), then SIGKILL of its process group after ``grace``.

    The group is killed even when the worker exited by itself: what its env started and did not
    stop (a helper process of a hung env) must not outlive it. The group id is the worker's pid,
    which the kernel does not reuse while the group has members.
    """
    if proc is None:
        return
    if proc.is_alive():
        proc.terminate()
        proc.join(timeout=grace)
    if proc.is_alive():
        proc.kill()
    proc.join(timeout=5)
    if proc.pid is not None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


def _shutdown(procs: list[Any], pipes: list[Any], grace: float) -> None:
    """Close every worker: ask politely, read whatever is still in flight, kill what is left."""
    live: dict[Connection, int] = {}
    for i, pipe in enumerate(pipes):
        if pipe is None:
            continue
        try:
            pipe.send(("close", None))
            live[pipe] = i
        except Exception:
            pass
    deadline = time.monotonic() + grace
    while live:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        for conn in wait_pipes(live, left):
            try:
                status, payload = conn.recv()
                if status == "ok" and payload is None:
                    live.pop(conn, None)  # the close ack (a step result has a tuple payload)
            except Exception:
                live.pop(conn, None)
    for proc in procs:
        if proc is None:
            continue
        proc.join(timeout=max(0.0, deadline - time.monotonic()))
        _kill(proc, _KILL_GRACE_S)
    for pipe in pipes:
        if pipe is not None:
            pipe.close()


class EchoVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` envs in worker processes, stepped synchronously or EnvPool-style asynchronously.

    Args:
        env_fns: one callable per env, each returning a fresh env (picklable with cloudpickle).
        batch_size: how many ready envs :meth:`recv` returns (default: all).
        shared_memory: put every observation part whose space allows it in shared memory (the
            rest is pickled, see the module docstring); False pickles everything.
        context: multiprocessing start method (``fork``, ``spawn``, ``forkserver``; default: the
            platform's, like ``AsyncVectorEnv``).
        copy: return copies of the shared-memory observations (False: ``step``/``reset`` return
            views that the next call overwrites, like ``AsyncVectorEnv(copy=False)``).
        observation_mode: ``"same"`` (every env's observation space equals env 0's),
            ``"different"`` (same shapes and dtypes, other bounds allowed) or a tuple
            ``(observation_space, single_observation_space)`` to use as they are, as in Gymnasium.
        autoreset_mode: ``AutoresetMode.SAME_STEP`` (default), ``NEXT_STEP`` or ``DISABLED`` (or
            their string values).
        on_error: ``"raise"`` (default: env exceptions, dead and hung workers raise) or
            ``"restart"`` (restart the env in a fresh worker and report it in ``info``).
        max_restarts: restarts allowed in total with ``on_error="restart"``; one more raises
            :class:`EchoWorkerError`.
        timeout: seconds one env's ``reset``/``step`` may take before its worker is killed
            (default None: no limit); also the default of ``close()``'s grace period.
        record_step_seconds: add ``info["step_seconds"]`` (wall time of each env's step).
        daemon: run workers as daemon processes (False lets an env start its own processes with
            ``multiprocessing``; workers are still stopped by :meth:`close`).

    Raises:
        EchoSpaceError: a sub-env's observation or action space differs from env 0's.
        ValueError: bad arguments (the message says which and what to pass).
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        batch_size: int | None = None,
        shared_memory: bool = True,
        context: str | None = None,
        *,
        copy: bool = True,
        observation_mode: str | tuple[spaces.Space, spaces.Space] = "same",
        autoreset_mode: str | AutoresetMode = AutoresetMode.SAME_STEP,
        on_error: str = "raise",
        max_restarts: int = 100,
        timeout: float | None = None,
        record_step_seconds: bool = False,
        daemon: bool = True,
    ) -> None:
        self.closed = False  # first, so that close()/__del__ work whatever fails below
        self._finalizer: Any = None
        if not env_fns:
            raise ValueError("EchoVectorEnv needs at least one env_fn")
        self.env_fns = list(env_fns)
        self.num_envs = len(self.env_fns)
        self.batch_size = self.num_envs if batch_size is None else int(batch_size)
        if not 1 <= self.batch_size <= self.num_envs:
            raise ValueError(f"batch_size must be in [1, num_envs={self.num_envs}], got {batch_size}")
        try:
            mode = (
                autoreset_mode if isinstance(autoreset_mode, AutoresetMode) else AutoresetMode(autoreset_mode)
            )
        except ValueError:
            mode = None
        if mode is None:
            raise ValueError(
                "autoreset_mode must be AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP or "
                f"AutoresetMode.DISABLED, got {autoreset_mode!r}"
            )
        self.autoreset_mode = mode
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
        self.on_error = on_error
        if int(max_restarts) < 0:
            raise ValueError(f"max_restarts must be >= 0, got {max_restarts}")
        self.max_restarts = int(max_restarts)
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
        self.timeout = None if timeout is None else float(timeout)
        custom = isinstance(observation_mode, tuple) and len(observation_mode) == 2
        if custom and not all(isinstance(sp, spaces.Space) for sp in observation_mode):
            raise TypeError(
                f"Expected both elements of observation_mode to be Spaces, got {type(observation_mode[0])} "
                f"and {type(observation_mode[1])}"
            )
        if not custom and observation_mode not in ("same", "different"):
            raise ValueError(
                "Invalid `observation_mode`, expected: 'same' or 'different' or tuple of single and batch "
                f"observation space, actual got {observation_mode}"
            )
        self.observation_mode = observation_mode
        batch_and_single = observation_mode if isinstance(observation_mode, tuple) else None
        self.copy = bool(copy)
        self.shared_memory = bool(shared_memory)
        self.record_step_seconds = bool(record_step_seconds)
        self.daemon = bool(daemon)
        self._ctx = mp.get_context(context)
        self.restarts = 0

        # Spaces come from a throwaway env in this process, as AsyncVectorEnv does.
        probe = self.env_fns[0]()
        self.single_observation_space = batch_and_single[1] if batch_and_single else probe.observation_space
        self.single_action_space = probe.action_space
        self.metadata = dict(getattr(probe, "metadata", {}) or {})
        self.metadata["autoreset_mode"] = self.autoreset_mode
        self.render_mode = getattr(probe, "render_mode", None)
        self.spec = getattr(probe, "spec", None)
        probe.close()
        if batch_and_single:  # (batch space, single space), as AsyncVectorEnv takes them
            self.observation_space = batch_and_single[0]
        elif observation_mode == "different":
            self.observation_space = batch_differing_spaces([fn().observation_space for fn in self.env_fns])
        else:
            self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.recv_observation_space = (
            self.observation_space
            if self.batch_size == self.num_envs
            else batch_space(self.single_observation_space, self.batch_size)
        )
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._action_spaces: dict[int, spaces.Space] = {self.num_envs: self.action_space}

        self._layout = _build_layout(
            self.single_observation_space, self.num_envs, self._ctx, self.shared_memory
        )
        kinds = _layout_kinds(self._layout)
        self._uses_shm = "S" in kinds
        self._views = _views(self.single_observation_space, self._layout, self.num_envs)

        self._pipes: list[Connection | None] = [None] * self.num_envs
        self._procs: list[Any] = [None] * self.num_envs
        self._pending: dict[int, tuple[str, float, Any]] = {}  # env -> (command, sent at, payload)
        self._ready: dict[int, tuple[Any, ...]] = {}  # finished results not yet returned
        self._last_rem: list[Any] = [None] * self.num_envs  # pickled part of each env's last obs
        self._dead: dict[int, str] = {}  # env -> why its worker is stopped (on_error="raise")
        self._reset_next: set[int] = set()  # NEXT_STEP: restart + reset at the next send
        self._done_prev = np.zeros(self.num_envs, dtype=bool)
        self._has_obs = np.zeros(self.num_envs, dtype=bool)  # its worker has returned an observation
        self._state: str | None = None  # "step"/"reset" between *_async and *_wait (Gymnasium API)
        self.last_infos: list[dict[str, Any]] = []
        self._finalizer = weakref.finalize(
            self, _shutdown, self._procs, self._pipes, self.timeout or _CLOSE_GRACE_S
        )
        for i in range(self.num_envs):
            self._start_worker(i)
        try:
            self._check_spaces()
        except BaseException:
            self._finalizer.detach()
            _shutdown(self._procs, self._pipes, 1.0)
            self.closed = True
            raise

    # --- worker management --------------------------------------------------------------------
    def _start_worker(self, i: int) -> None:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(  # type: ignore[attr-defined]  # typeshed's BaseContext lacks Process; every real context has it
            target=_worker,
            name=f"EchoVectorEnvWorker-{i}",
            args=(
                i,
                CloudpickleWrapper(self.env_fns[i]),
                child,
                parent,
                self._layout,
                self.autoreset_mode,
                self.record_step_seconds,
                # Only a forked child holds copies of the other workers' pipes (others pickle args).
                [p for p in self._pipes if p is not None] if self._ctx.get_start_method() == "fork" else [],
            ),
            daemon=self.daemon,
        )
        proc.start()
        child.close()
        self._pipes[i] = parent
        self._procs[i] = proc

    def _stop_worker(self, i: int, polite: bool = False) -> None:
        """Stop env ``i``'s worker: with ``polite`` it is asked to close its env first."""
        pipe, proc = self._pipes[i], self._procs[i]
        if polite and pipe is not None and proc is not None and proc.is_alive():
            try:
                pipe.send(("close", None))
                if pipe.poll(self.timeout or _CLOSE_GRACE_S):
                    pipe.recv()
                proc.join(timeout=self.timeout or _CLOSE_GRACE_S)
            except Exception:
                pass
        _kill(proc, _KILL_GRACE_S)
        if pipe is not None:
            pipe.close()
        self._pipes[i] = None
        self._procs[i] = None

    def _check_spaces(self) -> None:
        for i in range(self.num_envs):
            self._send_raw_or_raise(
                i,
                (
                    "check_spaces",
                    (
                        "same" if self.observation_mode == "same" else "different",
                        self.single_observation_space,
                        self.single_action_space,
                    ),
                ),
            )
        for i in range(self.num_envs):
            try:
                status, result = self._recv_raw(i, self.timeout, "check_spaces")
            except _Gone as gone:
                raise EchoWorkerError(f"env {i}: {gone} (while it was being built)", i) from None
            if status == "env_error":
                self._raise_env_error(i, "make", result)
            if status != "ok":
                raise EchoWorkerError(f"env {i}: {result['type']}: {result['message']}", i)
            same_obs, same_act, obs_repr, act_repr = result
            hint = (
                "; a custom Space class needs an __eq__ for this check"
                if " object at 0x" in obs_repr + act_repr
                else ""
            )
            if not same_obs:
                if self.observation_mode == "same":
                    rule = "equal to"
                    # AsyncVectorEnv's words, which code may match on.
                    why = (
                        "the sub-environments observation spaces are not equivalent. If this is intentional, "
                        "use `observation_mode='different'` instead (it allows other bounds with equal shapes "
                        "and dtypes)"
                    )
                else:
                    rule = "of the same shape and dtype as"
                    why = "the sub-environment's observation spaces do not share a common shape and dtype"
                raise EchoSpaceError(
                    f"env {i}'s observation space {obs_repr} is not {rule} env 0's "
                    f"{self.single_observation_space!r}: {why}{hint}"
                )
            if not same_act:
                raise EchoSpaceError(
                    f"env {i}'s action space {act_repr} differs from env 0's {self.single_action_space!r}: "
                    f"every env must have the same action space{hint}"
                )

    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (for monitoring, and for fault tests)."""
        return [p.pid for p in self._procs if p is not None and p.pid is not None and p.is_alive()]

    # --- raw messaging ------------------------------------------------------------------------
    def _send_raw(self, i: int, message: Any) -> None:
        pipe = self._pipes[i]
        if pipe is None:
            raise _Gone(self._dead.get(i, "worker not running"))
        try:
            pipe.send(message)
        except (BrokenPipeError, ConnectionResetError, OSError) as exc:
            raise _Gone(f"worker process died ({self._exit_reason(i)})") from exc

    def _send_raw_or_raise(self, i: int, message: Any) -> None:
        try:
            self._send_raw(i, message)
        except _Gone as gone:
            raise EchoWorkerError(f"env {i}: {gone}", i) from None

    def _pipe(self, i: int) -> Connection:
        """Worker ``i``'s pipe (raises ``_Gone`` when the worker is not running)."""
        pipe = self._pipes[i]
        if pipe is None:
            raise _Gone(self._dead.get(i, "worker not running"))
        return pipe

    def _recv_raw(self, i: int, timeout: float | None, what: str) -> tuple[str, Any]:
        pipe = self._pipe(i)
        try:
            if timeout is not None and not pipe.poll(timeout):
                raise _Gone(f"timed out after {timeout:g} s in {what}", hung=True)
            return pipe.recv()
        except (EOFError, ConnectionResetError, OSError) as exc:
            raise _Gone(f"worker process died ({self._exit_reason(i)}) during {what}") from exc

    def _exit_reason(self, i: int) -> str:
        proc = self._procs[i]
        if proc is None:
            return "not running"
        proc.join(timeout=1)
        code = proc.exitcode
        if code is None:
            return "pipe closed"
        return f"exit code {code}" if code >= 0 else f"killed by signal {-code}"

    def _raise_env_error(self, i: int, command: str, error: dict[str, Any]) -> None:
        exc = _load_exc(error)
        where = f"EchoVectorEnv env {i} ({error.get('phase', command)})"
        if exc is None:
            raise EchoWorkerError(f"env {i}: {error['type']}: {error['message']}\n{error['traceback']}", i)
        exc.add_note(f"raised by {where}; the worker's traceback:\n{error['traceback']}")
        raise exc

    # --- failure handling ---------------------------------------------------------------------
    def _fail(
        self,
        i: int,
        command: str,
        payload: Any,
        reason: str,
        error: dict[str, Any] | None = None,
        hung: bool = False,
    ) -> tuple[Any, ...]:
        """Env ``i`` failed while running ``command``: raise, or restart it and return its row."""
        self._pending.pop(i, None)
        msg = f"env {i}: {reason}"
        if self.on_error == "raise" or self.restarts >= self.max_restarts:
            self._stop_worker(i, polite=error is not None)
            self._dead[i] = msg
            if self.on_error == "restart":
                logger.error("%s; restart budget of %d exhausted", msg, self.max_restarts)
                raise EchoWorkerError(
                    f"{msg}; restart budget exhausted (max_restarts={self.max_restarts})", i
                ) from _load_exc(error)
            logger.error("%s%s", msg, f"\n{error['traceback']}" if error else "")
            if error is not None:
                # AsyncVectorEnv's two warnings per failed worker (gymnasium.logger.error).
                gym.logger.error("Received the following error from Worker-%s - Shutting it down", i)
                gym.logger.error("%s", error["traceback"])
                self._raise_env_error(i, command, error)
            if hung:
                raise EchoTimeoutError(f"{msg}; its worker was killed (reset() starts a new one)")
            raise EchoWorkerError(f"{msg}; reset() starts a new worker", i)
        self.restarts += 1
        logger.warning("%s; restarting it (restart %d of at most %d)", msg, self.restarts, self.max_restarts)
        extra = {"error": msg, "worker_restarted": True}
        if command == "reset":
            seed, options = payload
            rem, info = self._respawn(i, seed, options)
            return (rem, 0.0, False, False, {**info, **extra})
        if error is not None:
            phase = error["phase"]
        else:
            phase = (
                "autoreset"
                if self.autoreset_mode == AutoresetMode.NEXT_STEP and self._done_prev[i]
                else "step"
            )
        if self.autoreset_mode in (AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED):
            if phase == "autoreset":
                rem, info = self._respawn(i, None, None)
                return (rem, 0.0, False, False, {**info, **extra})
            # The episode ends here, on its last real observation; the next step is the reset step.
            self._stop_worker(i, polite=error is not None)
            self._reset_next.add(i)
            return (self._last_rem[i], 0.0, False, True, extra)
        partial = error.get("partial") if error else None
        if partial is not None:  # a real end whose autoreset failed: keep its outcome
            final_obs, reward, terminated, truncated, final_info = partial
        else:  # the step itself failed: the bootstrap target is the last obs the episode had
            final_obs, reward, terminated, truncated, final_info = self._obs_row(i), 0.0, False, True, {}
        rem, info = self._respawn(i, None, None)
        return (
            rem,
            reward,
            terminated,
            truncated,
            {"final_info": final_info, "final_obs": final_obs, **info, **extra},
        )

    def _respawn(self, i: int, seed: Any, options: Any) -> tuple[Any, dict[str, Any]]:
        """A fresh worker for env ``i``, reset; failures count against the restart budget."""
        while True:
            self._stop_worker(i, polite=True)
            self._start_worker(i)
            self._dead.pop(i, None)
            self._reset_next.discard(i)
            try:
                self._send_raw(i, ("reset", (seed, options)))
                status, result = self._recv_raw(i, self.timeout, "reset")
            except _Gone as gone:
                reason = str(gone)
            else:
                if status == "ok":
                    return result[0], result[4]
                reason = f"{result['type']}: {result['message']}"
            if self.restarts >= self.max_restarts:
                self._stop_worker(i)
                self._dead[i] = f"env {i}: failed again after a restart ({reason})"
                raise EchoWorkerError(
                    f"env {i}: failed again after a restart ({reason}); restart budget exhausted "
                    f"(max_restarts={self.max_restarts})",
                    i,
                )
            self.restarts += 1
            logger.warning("env %d: failed again after a restart (%s); restarting it again", i, reason)

    # --- gathering results --------------------------------------------------------------------
    def _collect(self, i: int) -> tuple[Any, ...]:
        command, _, payload = self._pending[i]
        try:
            status, result = self._recv_raw(i, None, command)
        except _Gone as gone:
            return self._fail(i, command, payload, str(gone))
        if status == "ok":
            del self._pending[i]
            return result
        return self._fail(
            i, command, payload, f"{result['type']}: {result['message']} (in {result['phase']})", result
        )

    def _gather(self, want: int, only: set[int] | None = None, timeout: float | None = None) -> list[int]:
        """Block until ``want`` results (among ``only``, default any) are ready; return their ids."""
        start = time.monotonic()
        ready = [i for i in self._ready if only is None or i in only]
        while len(ready) < want:
            pool = [i for i in self._pending if only is None or i in only]
            if not pool:
                raise NoAsyncCallError(
                    "recv() without enough envs in flight; call send() or async_reset() first", "recv"
                )
            if timeout is None and len(ready) + len(pool) <= want:
                # Every env in flight is needed (lock-step): read them in order, no selector.
                for i in pool:
                    self._ready[i] = self._collect(i)
                    ready.append(i)
                continue
            wait_s = None
            if timeout is not None:
                now = time.monotonic()
                deadlines = {i: max(self._pending[i][1], start) + timeout for i in pool}
                expired = [i for i in pool if deadlines[i] <= now and not self._pipe(i).poll()]
                if expired:
                    self._expire(expired, timeout)
                    ready = [i for i in self._ready if only is None or i in only]
                    continue
                wait_s = max(0.0, min(deadlines.values()) - now)
            pipes = {self._pipe(i): i for i in pool}
            for conn in wait_pipes(pipes, wait_s):
                i = pipes[conn]
                self._ready[i] = self._collect(i)
                ready.append(i)
        return ready

    def _gather_all(self, timeout: float | None) -> list[int]:
        """Wait for every env (``step``/``reset``); on an error the others' results are discarded
        before it propagates, so the next call starts clean (as AsyncVectorEnv reads every pipe)."""
        ids = list(range(self.num_envs))
        try:
            if self.on_error == "raise" and timeout is None:
                # As AsyncVectorEnv: read every env, report each failure, raise the last one.
                errors: list[BaseException] = []
                for i in ids:
                    if i in self._pending:
                        try:
                            self._ready[i] = self._collect(i)
                        except Exception as exc:  # noqa: BLE001  (re-raised below)
                            errors.append(exc)
                if errors:
                    gym.logger.error("Raising the last exception back to the main process.")
                    raise errors[-1]
            else:
                self._gather(self.num_envs, set(ids), timeout)
        except BaseException:
            self._drain(timeout)
            raise
        return ids

    def _expire(self, ids: list[int], timeout: float) -> None:
        """Envs ``ids`` ran past ``timeout``: kill them, then raise or restart each."""
        if self.on_error == "raise" or self.restarts + len(ids) > self.max_restarts:
            for i in ids:
                command = self._pending.pop(i)[0]
                self._stop_worker(i)
                self._dead[i] = f"env {i}: timed out after {timeout:g} s in {command}"
                logger.error("%s; worker killed", self._dead[i])
            if self.on_error == "restart":
                raise EchoWorkerError(
                    f"envs {ids} timed out after {timeout:g} s; restart budget exhausted "
                    f"(max_restarts={self.max_restarts})"
                )
            raise EchoTimeoutError(
                f"envs {ids} timed out after {timeout:g} s; their workers were killed (reset() starts new ones)"
            )
        for i in ids:
            command, _, payload = self._pending[i]
            self._stop_worker(i)
            self._ready[i] = self._fail(
                i, command, payload, f"timed out after {timeout:g} s in {command}; worker killed", hung=True
            )

    def _drain(self, timeout: float | None = None) -> None:
        """Wait for and discard in-flight results (a reset supersedes them); failures only stop workers."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._pending:
            pipes = {self._pipe(i): i for i in self._pending}
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = wait_pipes(pipes, left)
            if not ready:  # hung: stop them, reset() starts new workers
                for i in list(self._pending):
                    self._stop_worker(i)
                    self._dead[i] = f"env {i}: timed out while its result was being discarded"
                    del self._pending[i]
                break
            for conn in ready:
                i = pipes[conn]
                try:
                    status, _ = self._recv_raw(i, None, "drain")
                except _Gone as gone:
                    status = "gone"
                    self._dead[i] = f"env {i}: {gone}"
                if status != "ok":
                    self._stop_worker(i, polite=status != "gone")
                    self._dead.setdefault(i, f"env {i}: failed while its result was being discarded")
                del self._pending[i]
        self._ready.clear()

    def _assemble(self, ids: list[int], rems: list[Any], full: bool) -> Any:
        return self._assemble_node(self.single_observation_space, self._layout, self._views, ids, rems, full)

    def _assemble_node(
        self,
        space: spaces.Space,
        node: tuple[str, Any],
        view: Any,
        ids: list[int],
        rems: list[Any],
        full: bool,
    ) -> Any:
        kind, data = node
        if kind == "D":
            return {
                k: self._assemble_node(cast(spaces.Dict, space)[k], c, view[k], ids, _sub(rems, k), full)
                for k, c in data.items()
            }
        if kind == "T":
            return tuple(
                self._assemble_node(cast(spaces.Tuple, space)[j], c, view[j], ids, _sub(rems, j), full)
                for j, c in enumerate(data)
            )
        if kind == "S":
            if view is None:  # Text/OneOf: decoded on read; OneOf's arrays are views of the buffer
                # A tuple of rows: the spaces decoded on read (Text, OneOf, custom) are not Dict spaces.
                decoded = cast(tuple[Any, ...], read_from_shared_memory(space, data, n=self.num_envs))
                rows = tuple(decoded[i] for i in ids)
                return copy.deepcopy(rows) if self.copy else rows
            if full:
                return view.copy() if self.copy else view
            return view[np.asarray(ids, dtype=np.int64)]
        # The stub of concatenate takes no None, but a custom space's empty array is None and its
        # concatenate ignores ``out`` (gymnasium.vector.utils.space_utils._concatenate_custom).
        return concatenate(space, rems, create_empty_array(space, n=len(ids)))  # type: ignore[arg-type]

    def _obs_row(self, i: int) -> Any:
        """Env ``i``'s last delivered observation (shared-memory row + its pickled part)."""
        saved = self.copy
        self.copy = True
        try:
            batch = self._assemble([i], [self._last_rem[i]], full=self.num_envs == 1)
        finally:
            self.copy = saved
        return _row0(self._layout, batch)

    def _package(
        self, ids: list[int], env_ids: bool = False
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        results = [self._ready.pop(i) for i in ids]
        rems = [r[0] for r in results]
        for i, rem in zip(ids, rems, strict=True):
            self._last_rem[i] = rem
        self._has_obs[ids] = True
        full = ids == list(range(self.num_envs))
        obs = self._assemble(ids, rems, full)
        rewards = np.array([r[1] for r in results], dtype=np.float64)
        terminated = np.array([r[2] for r in results], dtype=np.bool_)
        truncated = np.array([r[3] for r in results], dtype=np.bool_)
        self._done_prev[ids] = terminated | truncated
        self.last_infos = [r[4] for r in results]  # per-env dicts, for adapters that want them
        infos = _batch_infos(self.last_infos)
        if env_ids:
            infos["env_id"] = np.asarray(ids, dtype=np.int32)
            infos["_env_id"] = np.ones(len(ids), dtype=np.bool_)
        return obs, rewards, terminated, truncated, infos

    # --- validation ---------------------------------------------------------------------------
    def _assert_open(self) -> None:
        if self.closed:
            raise ClosedEnvironmentError(
                f"Trying to operate on `{type(self).__name__}`, after a call to `close()`."
            )

    def _check_ids(self, env_ids: Sequence[int] | np.ndarray | None) -> list[int]:
        if env_ids is None:
            ids = list(range(self.num_envs))
        else:
            arr = np.asarray(env_ids)
            if arr.size and not np.issubdtype(arr.dtype, np.integer):
                raise ValueError(f"env_ids must be integers, got {arr.dtype}")
            ids = [int(i) for i in arr.ravel()]
        bad = [i for i in ids if not 0 <= i < self.num_envs]
        if bad:
            raise ValueError(f"env ids {bad} out of range [0, {self.num_envs})")
        if len(set(ids)) != len(ids):
            raise ValueError(f"env ids must be distinct, got {ids}")
        busy = [i for i in ids if i in self._pending]
        if busy:
            raise AlreadyPendingCallError(
                f"envs {busy} already have a step in flight; recv() them first", "send"
            )
        waiting = [i for i in ids if i in self._ready]
        if waiting:
            raise AlreadyPendingCallError(
                f"envs {waiting} have finished but recv() has not returned their results yet; recv() them first",
                "send",
            )
        dead = [self._dead[i] for i in ids if i in self._dead]
        if dead:
            raise EchoWorkerError(f"{'; '.join(dead)}; call reset() to start new workers", None)
        return ids

    def _split_actions(self, actions: Any, k: int) -> list[Any]:
        space = self._action_spaces.get(k)
        if space is None:
            space = self._action_spaces[k] = batch_space(self.single_action_space, k)
        try:
            per_env = list(iterate(space, actions))
        except Exception as exc:
            msg = f"cannot split actions into {k} per-env actions of {self.single_action_space}: {exc}"
            # A scalar or other non-iterable stays a TypeError, as AsyncVectorEnv raises it.
            raise (TypeError if isinstance(exc, TypeError) else ValueError)(msg) from exc
        if len(per_env) != k:
            raise ValueError(f"send() got {len(per_env)} actions for {k} env ids")
        return per_env

    def _send_steps(self, ids: list[int], per_env: list[Any]) -> None:
        """Send one step per env, after every message is serialised (a bad action sends nothing)."""
        try:
            messages = [
                ForkingPickler.dumps(("reset", (None, None)) if i in self._reset_next else ("step", a))
                for i, a in zip(ids, per_env, strict=True)
            ]
        except Exception as exc:
            raise ValueError(f"an action could not be sent to its worker (not picklable?): {exc}") from exc
        now = time.monotonic()
        for i, message in zip(ids, messages, strict=True):
            command = "step"
            if i in self._reset_next:  # NEXT_STEP after a failure: this step is the reset step
                if self._pipes[i] is None:
                    self._start_worker(i)
                self._reset_next.discard(i)
                command = "reset"
            pipe = self._pipes[i]
            assert pipe is not None
            try:
                pipe.send_bytes(message)
            except (BrokenPipeError, ConnectionResetError, OSError):
                pass  # dead already: recv() finds the closed pipe and reports it
            self._pending[i] = (command, now, (None, None) if command == "reset" else None)

    def _seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, int | np.integer):
            return [int(seed) + i for i in range(self.num_envs)]
        seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(
                f"If seeds are passed as a list the length must match num_envs={self.num_envs} but got length={len(seeds)}."
            )
        return seeds

    def _reset_mask(self, options: dict[str, Any] | None) -> tuple[dict[str, Any] | None, np.ndarray | None]:
        """Split Gymnasium's ``options["reset_mask"]`` (reset only those envs) off ``options``."""
        if options is None or "reset_mask" not in options:
            return options, None
        options = dict(options)
        mask = options.pop("reset_mask")
        if not isinstance(mask, np.ndarray):
            raise TypeError(f"`options['reset_mask']` must be a numpy array, got {type(mask)}")
        if mask.shape != (self.num_envs,):
            raise ValueError(
                f"`options['reset_mask']` must have shape `({self.num_envs},)`, got {mask.shape}"
            )
        if mask.dtype != np.bool_:
            raise TypeError(f"`options['reset_mask']` must have `dtype=np.bool_`, got {mask.dtype}")
        if not np.any(mask):
            raise ValueError(
                "`options['reset_mask']` must contain a boolean array with at least one True value, "
                f"got reset_mask={mask}"
            )
        return options, mask

    def _send_resets(self, seeds: list[Any], options: list[Any], mask: np.ndarray | None = None) -> None:
        self._drain(self.timeout)
        for i in range(self.num_envs):
            if i in self._dead or i in self._reset_next or self._pipes[i] is None:
                self._stop_worker(i)
                self._start_worker(i)
                self._dead.pop(i, None)
                self._reset_next.discard(i)
                self._has_obs[i] = False
        now = time.monotonic()
        for i in range(self.num_envs):
            payload = (seeds[i], options[i])
            # Left out of the mask: its last observation again (a fresh worker has none: it is reset).
            noop = mask is not None and not mask[i] and bool(self._has_obs[i])
            try:
                self._send_raw(i, ("reset-noop", None) if noop else ("reset", payload))
            except _Gone:
                pass  # reported by the wait
            self._pending[i] = ("reset", now, payload)

    # --- EnvPool-style async API --------------------------------------------------------------
    def async_reset(
        self, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> None:
        """Start resetting every env (results in flight are discarded); :meth:`recv` returns them."""
        self._assert_open()
        seeds = self._seeds(seed)
        options, mask = self._reset_mask(options)
        self._state = None
        self._send_resets(seeds, [options] * self.num_envs, mask)

    def send(self, actions: Any, env_ids: Sequence[int] | np.ndarray | None = None) -> None:
        """Start stepping envs ``env_ids`` (default all) with ``actions`` (one row per id).

        Raises:
            ValueError: bad ids or actions; nothing is sent then.
            AlreadyPendingCallError: an env is still stepping, or its result awaits :meth:`recv`.
            EchoWorkerError: an env's worker stopped after an error (``reset()`` restarts it).
        """
        self._assert_open()
        ids = self._check_ids(env_ids)
        per_env = self._split_actions(actions, len(ids)) if ids else []
        self._send_steps(ids, per_env)

    def recv(
        self, timeout: float | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The first ``batch_size`` envs to finish, as a batch; their ids are ``info["env_id"]``.

        Args:
            timeout: seconds an env in flight may run (default: the constructor's ``timeout``).
        """
        self._assert_open()
        ids = self._gather(self.batch_size, timeout=self.timeout if timeout is None else timeout)
        return self._package(ids[: self.batch_size], env_ids=True)

    # --- synchronous VectorEnv API ------------------------------------------------------------
    def reset_async(
        self, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> None:
        """Send a reset to every env (Gymnasium's ``AsyncVectorEnv.reset_async``)."""
        self._assert_open()
        seeds = self._seeds(seed)
        if self._state is not None:
            raise AlreadyPendingCallError(
                f"Calling `reset_async` while waiting for a pending call to `{self._state}` to complete",
                self._state,
            )
        options, mask = self._reset_mask(options)
        self._send_resets(seeds, [options] * self.num_envs, mask)
        self._state = "reset"

    def reset_wait(self, timeout: float | None = None) -> tuple[Any, dict[str, Any]]:
        """Wait for :meth:`reset_async`'s results (``timeout`` as in :meth:`recv`)."""
        self._assert_open()
        if self._state != "reset":
            raise NoAsyncCallError("Calling `reset_wait` without any prior call to `reset_async`.", "reset")
        self._state = None
        ids = self._gather_all(self.timeout if timeout is None else timeout)
        obs, _, _, _, info = self._package(ids)
        return obs, info

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every env and wait for all of them (starts new workers for stopped ones)."""
        self.reset_async(seed=seed, options=options)
        return self.reset_wait()

    def step_async(self, actions: Any) -> None:
        """Send a step to every env (Gymnasium's ``AsyncVectorEnv.step_async``)."""
        self._assert_open()
        if self._state is not None:
            raise AlreadyPendingCallError(
                f"Calling `step_async` while waiting for a pending call to `{self._state}` to complete.",
                self._state,
            )
        if self._pending or self._ready:
            raise AlreadyPendingCallError(
                "step() while send()/recv() results are outstanding; recv() them or reset() first", "send"
            )
        self.send(actions)
        self._state = "step"

    def step_wait(
        self, timeout: float | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Wait for :meth:`step_async`'s results, rows in env-id order (``timeout`` as in :meth:`recv`)."""
        self._assert_open()
        if self._state != "step":
            raise NoAsyncCallError("Calling `step_wait` without any prior call to `step_async`.", "step")
        self._state = None
        return self._package(self._gather_all(self.timeout if timeout is None else timeout))

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every env and wait for all of them (rows in env-id order)."""
        self.step_async(actions)
        return self.step_wait()

    # --- attribute access ---------------------------------------------------------------------
    def _roundtrip_many(self, indices: Sequence[int], message: Any, what: str) -> list[Any]:
        self._assert_open()
        ids = [int(i) for i in indices]
        bad = [i for i in ids if not -self.num_envs <= i < self.num_envs]
        if bad:
            raise ValueError(f"env indices {bad} out of range for {self.num_envs} envs")
        ids = [i % self.num_envs for i in ids]  # negative indices count from the end, as in SB3
        for i in ids:
            if i in self._reset_next and self._pipes[i] is None:
                self._start_worker(i)  # restarted after a failure; its reset comes with the next step
            if i in self._pending or i in self._ready:
                raise AlreadyPendingCallError(
                    f"env {i} has a step in flight or unreturned; recv() it first", what
                )
            if i in self._dead or self._pipes[i] is None:
                raise EchoWorkerError(
                    f"env {i}: its worker is not running ({self._dead.get(i, 'stopped')}); reset() starts a new one",
                    i,
                )
        sent = []
        try:
            for i in ids:
                self._send_raw(i, message(i))
                sent.append(i)
            answers = [self._recv_raw(i, self.timeout, what) for i in ids]
        except _Gone as gone:
            for i in ids:  # which one broke is unknown here: check each
                proc = self._procs[i]
                if proc is None or not proc.is_alive():
                    self._stop_worker(i)
                    self._dead[i] = f"env {i}: {gone}"
            raise EchoWorkerError(f"{what} failed: {gone}; reset() starts new workers") from None
        out = []
        for i, (status, result) in zip(ids, answers, strict=True):
            if status == "call_error":
                self._raise_env_error(i, what, result)
            if status != "ok":
                raise EchoWorkerError(f"env {i}: {result['type']}: {result['message']}", i)
            out.append(result)
        return out

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call (or read) ``name`` on every env; exceptions are re-raised with their own type."""
        if name in ("reset", "step", "close", "set_attr", "_setattr", "_check_spaces"):
            raise ValueError(f"Trying to call function `{name}` with `call`, use `{name}` directly instead.")
        return tuple(
            self._roundtrip_many(range(self.num_envs), lambda i: ("call", (name, args, kwargs)), "call")
        )

    def call_on(self, indices: Sequence[int], name: str, *args: Any, **kwargs: Any) -> list[Any]:
        """Call (or read) ``name`` on the envs ``indices``."""
        return self._roundtrip_many(indices, lambda i: ("call", (name, args, kwargs)), "call")

    def apply_on(self, indices: Sequence[int], fn: Callable[..., Any], *args: Any) -> list[Any]:
        """Run ``fn(env, *args)`` inside the workers of ``indices`` (``fn`` must be picklable)."""
        wrapped = CloudpickleWrapper(fn)
        return self._roundtrip_many(indices, lambda i: ("apply", (wrapped, args)), "apply")

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """``name`` of every env (through its wrappers)."""
        return self.call(name)

    def set_attr(self, name: str, values: Any) -> None:
        """Set ``name`` on every env: one value for all, or a list/tuple of ``num_envs`` values."""
        if not isinstance(values, list | tuple):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(
                "Values must be a list or tuple with length equal to the number of environments. "
                f"Got `{len(values)}` values for {self.num_envs} environments."
            )
        vals = list(values)
        self._roundtrip_many(range(self.num_envs), lambda i: ("setattr", (name, vals[i])), "set_attr")

    def set_attr_on(self, indices: Sequence[int], name: str, value: Any) -> None:
        """Set ``name`` to ``value`` on the envs ``indices``."""
        self._roundtrip_many(indices, lambda i: ("setattr", (name, value)), "set_attr")

    def render(self) -> tuple[Any, ...] | None:
        """Every env's ``render()`` (as ``AsyncVectorEnv.render``)."""
        return self.call("render")

    @property
    def np_random_seed(self) -> tuple[int, ...]:  # type: ignore[override]
        """Every env's ``np_random_seed``."""
        return self.get_attr("np_random_seed")

    # Per env and read-only, as AsyncVectorEnv's (VectorEnv's own is one generator with a setter).
    @property  # type: ignore[misc]
    def np_random(self) -> tuple[np.random.Generator, ...]:  # type: ignore[override]
        """Every env's ``np_random``."""
        return self.get_attr("np_random")

    def close_extras(self, timeout: float | None = None, terminate: bool = False) -> None:
        """Stop every worker: busy envs get ``timeout`` s (default: the constructor's, else 10 s)."""
        if self._finalizer is None:
            return
        if self._state is not None:
            gym.logger.warn(
                f"Calling `close` while waiting for a pending call to `{self._state}` to complete."
            )
        grace = 0.0 if terminate else (timeout if timeout is not None else (self.timeout or _CLOSE_GRACE_S))
        self._finalizer.detach()
        _shutdown(self._procs, self._pipes, grace)
        self._pending.clear()
        self._ready.clear()
        self._state = None

    def __repr__(self) -> str:
        return f"EchoVectorEnv(num_envs={self.num_envs}, batch_size={self.batch_size})"


def _batch_infos(infos: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Gymnasium's dict-of-arrays info format (``key`` + ``_key`` mask) for ``len(infos)`` rows."""
    out: dict[str, Any] = {}
    for row, info in enumerate(infos):
        _add_info(out, info, row, len(infos))
    return out


def _add_info(out: dict[str, Any], info: dict[str, Any], row: int, n: int) -> dict[str, Any]:
    # Same layout as gymnasium.vector.VectorEnv._add_info, but sized to the batch, not num_envs.
    for key, value in info.items():
        if key == "final_obs":
            array = out.get(key)
            if array is None:
                array = np.full(n, None, dtype=object)
            array[row] = value
        elif isinstance(value, dict):
            array = _add_info(out.get(key, {}), value, row, n)
        else:
            array = out.get(key)
            if array is None:
                if type(value) in (int, float, bool) or isinstance(value, np.number):
                    array = np.zeros(n, dtype=type(value))
                elif isinstance(value, np.ndarray):
                    array = np.zeros((n, *value.shape), dtype=value.dtype)
                else:
                    array = np.full(n, None, dtype=object)
            try:
                array[row] = value
            except (ValueError, TypeError):  # differing shapes/types across envs: fall back to objects
                array = array.astype(object) if array.ndim == 1 else np.array(list(array), dtype=object)
                array[row] = value
        out[key] = array
        mask = out.get(f"_{key}")
        if mask is None:
            mask = np.zeros(n, dtype=bool)
        mask[row] = True
        out[f"_{key}"] = mask
    return out


class EchoRecordEpisodeStatistics(RecordEpisodeStatistics):
    """Gymnasium's vector ``RecordEpisodeStatistics`` that also follows ``send``/``recv``.

    Gymnasium's vector wrappers only wrap ``reset``/``step``; reaching ``send``/``recv`` of the env
    underneath would bypass them. This one keeps the per-env returns and lengths by
    ``info["env_id"]``, so ``recv()`` rows carry ``info["episode"]`` (``r``, ``l``, ``t``, masked by
    ``info["_episode"]``, sized to the batch) and ``return_queue``/``length_queue`` fill up as with
    ``step``. Other Gymnasium vector wrappers do not forward ``send``/``recv`` (an
    ``AttributeError``), which is deliberate: forwarding would silently skip what they do.
    """

    def __init__(self, env: Any, buffer_length: int = 100, stats_key: str = "episode") -> None:
        super().__init__(env, buffer_length=buffer_length, stats_key=stats_key)
        self._awaiting_reset = np.zeros(self.num_envs, dtype=bool)

    @property
    def _echo(self) -> EchoVectorEnv:
        """The env underneath, with ``send``/``recv`` (Gymnasium types ``self.env`` as any VectorEnv)."""
        return cast(EchoVectorEnv, self.env)

    def async_reset(self, seed: Any = None, options: dict[str, Any] | None = None) -> None:
        """Start resetting every env and clear the running statistics."""
        self._echo.async_reset(seed=seed, options=options)
        self._awaiting_reset = np.ones(self.num_envs, dtype=bool)
        self.episode_start_times = np.full(self.num_envs, time.perf_counter())
        self.episode_returns = np.zeros(self.num_envs)
        self.episode_lengths = np.zeros(self.num_envs, dtype=int)
        self.prev_dones = np.zeros(self.num_envs, dtype=bool)

    def send(self, actions: Any, env_ids: Any = None) -> None:
        """Forwarded to the env."""
        self._echo.send(actions, env_ids)

    def recv(
        self, timeout: float | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The env's ``recv()`` with episode statistics for the rows that finished an episode."""
        obs, rewards, terminations, truncations, infos = self._echo.recv(timeout=timeout)
        ids = np.asarray(infos["env_id"], dtype=np.int64)
        # Rows that are reset results (of async_reset, or NEXT_STEP's reset step) are not steps.
        is_reset = self._awaiting_reset[ids].copy()
        if self._autoreset_mode == AutoresetMode.NEXT_STEP:
            is_reset |= self.prev_dones[ids]
        self._awaiting_reset[ids] = False
        now = time.perf_counter()
        for j, i in enumerate(ids):
            if is_reset[j]:
                self.episode_returns[i] = 0.0
                self.episode_lengths[i] = 0
                self.episode_start_times[i] = now
            else:
                self.episode_returns[i] += rewards[j]
                self.episode_lengths[i] += 1
        dones = np.logical_or(terminations, truncations)
        self.prev_dones[ids] = dones
        if dones.any():
            if self._stats_key in infos:
                raise ValueError(f"Attempted to add episode stats with key '{self._stats_key}' but it exists")
            done_ids = ids[dones]
            elapsed = np.round(now - self.episode_start_times[ids], 6)
            infos[self._stats_key] = {
                "r": np.where(dones, self.episode_returns[ids], 0.0),
                "l": np.where(dones, self.episode_lengths[ids], 0),
                "t": np.where(dones, elapsed, 0.0),
            }
            infos[f"_{self._stats_key}"] = dones
            self.episode_count += int(dones.sum())
            self.time_queue.extend(elapsed[dones])
            self.return_queue.extend(self.episode_returns[done_ids])
            self.length_queue.extend(self.episode_lengths[done_ids])
            if self._autoreset_mode == AutoresetMode.SAME_STEP:
                self.episode_returns[done_ids] = 0.0
                self.episode_lengths[done_ids] = 0
                self.episode_start_times[done_ids] = now
        return obs, rewards, terminations, truncations, infos
