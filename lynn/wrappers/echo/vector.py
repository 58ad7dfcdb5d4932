"""``EchoVectorEnv``: a process-per-env vector env with an EnvPool-style asynchronous API.

Gymnasium's ``AsyncVectorEnv.step`` waits for *every* sub-env, so one slow env (a browser step, a
chain transaction, a long-tailed tool call) stalls the whole batch. ``EchoVectorEnv`` adds EnvPool's
``send(actions, env_ids)`` / ``recv()`` pair: ``recv`` returns as soon as ``batch_size`` envs are
ready, with their ids in ``info["env_id"]``, and the stragglers keep running in the background::

    envs = EchoVectorEnv([lambda: gym.make("CartPole-v1")] * 8, batch_size=4)
    envs.async_reset(seed=0)
    while True:
        obs, reward, terminated, truncated, info = envs.recv()
        envs.send(policy(obs), info["env_id"])

Plain ``reset()``/``step()`` also work (they wait for all ``num_envs``), so the class is a drop-in
``gymnasium.vector.VectorEnv``.

Autoreset is **same-step** (``metadata["autoreset_mode"] == AutoresetMode.SAME_STEP``): when an env
terminates or truncates, the worker resets it at once; the returned obs is the first obs of the
new episode and ``info["final_obs"]`` / ``info["final_info"]`` (masked by ``info["_final_obs"]``)
hold the last obs and info of the finished one.

Every step's info also carries ``step_seconds``, the wall time of that env's ``step`` (and
autoreset) inside its worker, so stragglers are visible.

Observations travel through shared memory when the observation space allows it (Box, Discrete,
MultiBinary, Dict/Tuple of those, ...); otherwise (custom Text spaces, Graph, ...) they are pickled
through the worker's pipe. A worker process that dies is restarted and its env reset; that env's
row then has ``truncated=True``, ``info["worker_restarted"]=True`` and an ``info["error"]`` saying
what happened, and no other env is disturbed.
"""

from __future__ import annotations

import multiprocessing as mp
import time
import traceback
import weakref
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import (
    CloudpickleWrapper,
    batch_space,
    concatenate,
    create_empty_array,
    create_shared_memory,
    iterate,
    read_from_shared_memory,
    write_to_shared_memory,
)
from gymnasium.vector.vector_env import AutoresetMode

__all__ = ["EchoVectorEnv"]


def _worker(
    index: int, env_fn: CloudpickleWrapper, pipe: Connection, parent_pipe: Connection, shm: Any
) -> None:
    """Own one env; answer (command, payload) messages until told to close."""
    parent_pipe.close()
    env: gym.Env | None = None
    space = None
    try:
        env = env_fn()
        space = env.observation_space

        def emit(obs: Any) -> Any:
            if shm is None:
                return obs
            write_to_shared_memory(space, index, obs, shm)
            return None

        while True:
            command, payload = pipe.recv()
            if command == "reset":
                seed, options = payload
                obs, info = env.reset(seed=seed, options=options)
                pipe.send(("ok", (emit(obs), 0.0, False, False, info)))
            elif command == "step":
                t = time.perf_counter()
                obs, reward, terminated, truncated, info = env.step(payload)
                if terminated or truncated:
                    # Same-step autoreset: hand back the first obs of the next episode.
                    final_obs, final_info = obs, info
                    obs, info = env.reset()
                    info = dict(info)
                    info["final_obs"] = final_obs
                    info["final_info"] = final_info
                info.setdefault("step_seconds", time.perf_counter() - t)
                pipe.send(("ok", (emit(obs), float(reward), bool(terminated), bool(truncated), info)))
            elif command == "spaces":
                pipe.send(("ok", (env.observation_space, env.action_space, getattr(env, "metadata", {}))))
            elif command in ("call", "apply", "setattr"):
                # Attribute access errors are the caller's, not the env's: answer and keep serving.
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
                    pipe.send(("error", f"{type(exc).__name__}: {exc}"))
                else:
                    pipe.send(("ok", result))
            elif command == "close":
                pipe.send(("ok", None))
                break
            else:
                pipe.send(("error", f"unknown command {command!r}"))
    except (KeyboardInterrupt, EOFError, BrokenPipeError):
        pass
    except Exception as exc:  # reported to the parent, which restarts this worker
        try:
            pipe.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"))
        except Exception:
            pass
    finally:
        if env is not None:
            try:
                env.close()
            except Exception:
                pass
        pipe.close()


def _take(batched: Any, rows: Sequence[int]) -> Any:
    """Rows ``rows`` of a batched (possibly nested) observation, copied out of shared memory."""
    if isinstance(batched, dict):
        return {k: _take(v, rows) for k, v in batched.items()}
    if isinstance(batched, tuple):
        return tuple(_take(v, rows) for v in batched)
    return np.array(batched[np.asarray(rows, dtype=np.int64)], copy=True)


def _batch_infos(infos: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Gymnasium's dict-of-arrays info format (``key`` + ``_key`` mask) for ``len(infos)`` rows."""
    out: dict[str, Any] = {}
    for row, info in enumerate(infos):
        _add_info(out, info, row, len(infos))
    return out


def _add_info(out: dict[str, Any], info: dict[str, Any], row: int, n: int) -> dict[str, Any]:
    # Same layout as gymnasium.vector.VectorEnv._add_info, but sized to the batch, not num_envs.
    for key, value in info.items():
        if isinstance(value, dict) and key != "final_obs":
            array: Any = _add_info(out.get(key, {}), value, row, n)
        else:
            array = out.get(key)
            if array is None:
                if key != "final_obs" and (type(value) in (int, float, bool) or isinstance(value, np.number)):
                    array = np.zeros(n, dtype=type(value))
                elif key != "final_obs" and isinstance(value, np.ndarray):
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


class EchoVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` envs in worker processes, stepped synchronously or EnvPool-style asynchronously.

    Args:
        env_fns: one callable per env, each returning a fresh env (picklable with cloudpickle).
        batch_size: how many ready envs :meth:`recv` returns (default: all, i.e. synchronous).
        shared_memory: put observations in shared memory when the space allows it (falls back
            to pickling when it does not, e.g. for custom Text spaces).
        context: multiprocessing start method (``fork``, ``spawn``, ``forkserver``; default: the
            platform's, like ``AsyncVectorEnv``).
        restart_dead_workers: restart a worker process that died (its env is reset and the row is
            reported truncated with ``info["worker_restarted"]``); if False a dead worker raises.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        batch_size: int | None = None,
        shared_memory: bool = True,
        context: str | None = None,
        restart_dead_workers: bool = True,
    ) -> None:
        if not env_fns:
            raise ValueError("EchoVectorEnv needs at least one env_fn")
        self.env_fns = list(env_fns)
        self.num_envs = len(self.env_fns)
        self.batch_size = self.num_envs if batch_size is None else int(batch_size)
        if not 1 <= self.batch_size <= self.num_envs:
            raise ValueError(f"batch_size must be in [1, num_envs={self.num_envs}], got {batch_size}")
        self.restart_dead_workers = restart_dead_workers
        self._ctx = mp.get_context(context)
        self.closed = False
        self.restarts = 0

        # Spaces come from a throwaway env in this process, as AsyncVectorEnv does.
        probe = self.env_fns[0]()
        self.single_observation_space = probe.observation_space
        self.single_action_space = probe.action_space
        self.metadata = dict(getattr(probe, "metadata", {}) or {})
        self.metadata["autoreset_mode"] = AutoresetMode.SAME_STEP
        self.render_mode = getattr(probe, "render_mode", None)
        self.spec = getattr(probe, "spec", None)
        probe.close()
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

        self._shm: Any = None
        self._shm_view: Any = None
        if shared_memory:
            try:
                self._shm = create_shared_memory(
                    self.single_observation_space, n=self.num_envs, ctx=self._ctx
                )
                self._shm_view = read_from_shared_memory(
                    self.single_observation_space, self._shm, n=self.num_envs
                )
            except Exception:  # custom spaces (Lynn's Text, Graph, ...) have no shared layout: pickle
                self._shm = None
                self._shm_view = None

        self._pipes: list[Connection | None] = [None] * self.num_envs
        self._procs: list[mp.process.BaseProcess | None] = [None] * self.num_envs
        self._pending: set[int] = set()  # envs with a command in flight
        self._ready: dict[int, tuple[Any, ...]] = {}  # finished results not yet returned by recv()
        self.last_infos: list[dict[str, Any]] = []
        for i in range(self.num_envs):
            self._start_worker(i)
        self._finalizer = weakref.finalize(self, EchoVectorEnv._shutdown, self._procs, self._pipes)

    # --- worker management --------------------------------------------------------------------
    def _start_worker(self, i: int) -> None:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(
            target=_worker,
            name=f"EchoVectorEnvWorker-{i}",
            args=(i, CloudpickleWrapper(self.env_fns[i]), child, parent, self._shm),
            daemon=True,
        )
        proc.start()
        child.close()
        self._pipes[i] = parent
        self._procs[i] = proc

    def _restart(self, i: int, reason: str) -> tuple[Any, ...]:
        """Replace env ``i``'s worker and reset its env; the result row reports the loss."""
        if not self.restart_dead_workers:
            raise RuntimeError(f"EchoVectorEnv worker {i} died: {reason}")
        self._stop_worker(i)
        self.restarts += 1
        self._start_worker(i)
        pipe = self._pipes[i]
        assert pipe is not None
        pipe.send(("reset", (None, None)))
        status, payload = pipe.recv()
        if status != "ok":
            raise RuntimeError(f"EchoVectorEnv worker {i} failed again after a restart: {payload}")
        obs, _, _, _, info = payload
        info = dict(info)
        info.update(worker_restarted=True, error=f"env {i}: worker died ({reason}); restarted and reset")
        obs = self._read_obs(i, obs)
        info["final_obs"] = obs  # the lost episode's last obs is gone; keep SB3-style consumers working
        info["final_info"] = {}
        return obs, 0.0, False, True, info

    def _stop_worker(self, i: int) -> None:
        pipe, proc = self._pipes[i], self._procs[i]
        if pipe is not None:
            pipe.close()
        if proc is not None:
            if proc.is_alive():
                proc.terminate()
            proc.join(timeout=5)
        self._pipes[i] = None
        self._procs[i] = None

    @staticmethod
    def _shutdown(procs: list[Any], pipes: list[Any]) -> None:
        for pipe in pipes:
            if pipe is None:
                continue
            try:
                pipe.send(("close", None))
            except Exception:
                pass
        deadline = time.monotonic() + 2.0
        for proc in procs:
            if proc is None:
                continue
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=2)
        for pipe in pipes:
            if pipe is not None:
                pipe.close()

    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (for monitoring, and for fault tests)."""
        return [p.pid for p in self._procs if p is not None and p.pid is not None]

    # --- low-level messaging ------------------------------------------------------------------
    def _read_obs(self, i: int, obs: Any) -> Any:
        if self._shm_view is None:
            return obs
        return _row(self._shm_view, i)

    def _collect(self, i: int) -> tuple[Any, ...]:
        """Receive env ``i``'s answer (restarting it if its worker died)."""
        pipe = self._pipes[i]
        assert pipe is not None
        try:
            status, payload = pipe.recv()
        except (EOFError, ConnectionResetError, OSError):
            proc = self._procs[i]
            code = proc.exitcode if proc is not None else None
            if proc is not None and code is None:
                proc.join(timeout=1)
                code = proc.exitcode
            return self._restart(i, f"exit code {code}")
        if status != "ok":
            return self._restart(i, str(payload).splitlines()[0])
        return payload

    def _send(self, i: int, command: str, payload: Any) -> None:
        if i in self._pending:
            raise RuntimeError(f"env {i} already has a command in flight; recv() it first")
        pipe = self._pipes[i]
        assert pipe is not None
        try:
            pipe.send((command, payload))
        except (BrokenPipeError, OSError):
            # Dead already: the answer is the restart row, delivered by the next recv().
            self._ready[i] = self._restart(i, "pipe closed")
            return
        self._pending.add(i)

    def _gather(self, want: int, only: set[int] | None = None) -> list[int]:
        """Block until ``want`` results (among ``only``, default any) are ready; return their ids."""
        pool = self._pending if only is None else (self._pending & only)
        ready_ids = [i for i in self._ready if only is None or i in only]
        while len(ready_ids) < want:
            if not pool:
                raise RuntimeError("recv() without enough envs in flight; call send() or async_reset() first")
            pipes = {self._pipes[i]: i for i in pool}
            for conn in wait(list(pipes)):
                i = pipes[conn]  # type: ignore[index]
                self._ready[i] = self._collect(i)
                self._pending.discard(i)
                ready_ids.append(i)
            pool = self._pending if only is None else (self._pending & only)
        return ready_ids

    def _package(self, ids: list[int]) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        results = [self._ready.pop(i) for i in ids]
        if self._shm_view is not None:
            obs = _take(self._shm_view, ids)
        else:
            out = create_empty_array(self.single_observation_space, n=len(ids))
            obs = concatenate(self.single_observation_space, [r[0] for r in results], out)
        rewards = np.array([r[1] for r in results], dtype=np.float64)
        terminated = np.array([r[2] for r in results], dtype=np.bool_)
        truncated = np.array([r[3] for r in results], dtype=np.bool_)
        self.last_infos = [r[4] for r in results]  # per-env dicts, for adapters that want them
        infos = _batch_infos(self.last_infos)
        infos["env_id"] = np.asarray(ids, dtype=np.int32)
        return obs, rewards, terminated, truncated, infos

    # --- EnvPool-style async API --------------------------------------------------------------
    def async_reset(
        self, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> None:
        """Start resetting every env; results come back through :meth:`recv` (reward 0)."""
        self._drain()
        seeds = self._seeds(seed)
        for i in range(self.num_envs):
            self._send(i, "reset", (seeds[i], options))

    def send(self, actions: Any, env_ids: Sequence[int] | np.ndarray | None = None) -> None:
        """Start stepping envs ``env_ids`` (default all) with ``actions`` (one row per id)."""
        ids = list(range(self.num_envs)) if env_ids is None else [int(i) for i in np.asarray(env_ids).ravel()]
        per_env = list(iterate(self.action_space, actions)) if ids else []
        if len(per_env) != len(ids):
            raise ValueError(f"send() got {len(per_env)} actions for {len(ids)} env ids")
        for i, action in zip(ids, per_env, strict=True):
            self._send(i, "step", action)

    def recv(self) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The first ``batch_size`` envs to finish, as a batch; their ids are ``info["env_id"]``."""
        ids = self._gather(self.batch_size)[: self.batch_size]
        return self._package(ids)

    # --- synchronous VectorEnv API ------------------------------------------------------------
    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every env and wait for all of them."""
        self.async_reset(seed=seed, options=options)
        ids = list(range(self.num_envs))
        self._gather(self.num_envs, set(ids))
        obs, _, _, _, info = self._package(ids)
        return obs, info

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every env and wait for all of them (rows in env-id order)."""
        if self._pending or self._ready:
            raise RuntimeError("step() while async results are outstanding; recv() them or reset()")
        self.send(actions)
        ids = list(range(self.num_envs))
        self._gather(self.num_envs, set(ids))
        return self._package(ids)

    def _drain(self) -> None:
        """Wait for and discard in-flight results (a reset supersedes them)."""
        if self._pending:
            self._gather(len(self._pending) + len(self._ready))
        self._ready.clear()

    def _seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, int | np.integer):
            return [int(seed) + i for i in range(self.num_envs)]
        seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(f"got {len(seeds)} seeds for {self.num_envs} envs")
        return seeds

    # --- attribute access (used by the SB3 adapter) -------------------------------------------
    def _roundtrip(self, i: int, command: str, payload: Any) -> Any:
        if i in self._pending:
            raise RuntimeError(f"env {i} has a step in flight; recv() it first")
        pipe = self._pipes[i]
        assert pipe is not None
        pipe.send((command, payload))
        status, result = pipe.recv()
        if status != "ok":
            raise RuntimeError(f"env {i}: {result}")
        return result

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call (or read) ``name`` on every env."""
        return tuple(self._roundtrip(i, "call", (name, args, kwargs)) for i in range(self.num_envs))

    def call_on(self, indices: Sequence[int], name: str, *args: Any, **kwargs: Any) -> list[Any]:
        """Call (or read) ``name`` on the envs ``indices``."""
        return [self._roundtrip(i, "call", (name, args, kwargs)) for i in indices]

    def apply_on(self, indices: Sequence[int], fn: Callable[..., Any], *args: Any) -> list[Any]:
        """Run ``fn(env, *args)`` inside the workers of ``indices`` (``fn`` must be picklable)."""
        return [self._roundtrip(i, "apply", (CloudpickleWrapper(fn), args)) for i in indices]

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return self.call(name)

    def set_attr(self, name: str, values: Any) -> None:
        if not isinstance(values, list | tuple):
            values = [values] * self.num_envs
        for i, value in enumerate(values):
            self._roundtrip(i, "setattr", (name, value))

    def close_extras(self, **kwargs: Any) -> None:
        if self._finalizer.alive:
            try:
                if self._pending:
                    self._drain()
            except Exception:
                pass
            self._finalizer()
        self._pending.clear()
        self._ready.clear()

    def __repr__(self) -> str:
        return f"EchoVectorEnv(num_envs={self.num_envs}, batch_size={self.batch_size})"


def _row(view: Any, i: int) -> Any:
    if isinstance(view, dict):
        return {k: _row(v, i) for k, v in view.items()}
    if isinstance(view, tuple):
        return tuple(_row(v, i) for v in view)
    return np.array(view[i], copy=True)
