"""Weight broadcast: one-to-many vs peer-assisted pipelined chain, on Ray and in simulation.

**Bandwidth model.** Every node (learner or worker) has an uplink of ``B`` bytes/s that sends one
thing at a time; downlinks are not the bottleneck; each hop adds latency ``L``. The model has
``M`` bytes, cut into chunks of ``c`` bytes (``K = ceil(M/c)`` chunks).

- **one-to-many**: the learner uploads the whole model to each of ``N`` workers in turn, so the
  last worker is done after ``N·M/B + L``.
- **pipelined chain** (ECHO-2's peer-assisted broadcast): the learner uploads chunk ``k`` to worker 1,
  which relays it to worker 2 while receiving chunk ``k+1``, and so on. The last worker has the
  model after ``M/B + (N−1)·c/B + N·L``: the learner's uplink carries the model once.

:func:`simulate_broadcast` is a discrete-event simulation of both under this model (it reproduces
the closed forms above, and takes per-node bandwidths for heterogeneous links);
:class:`RayBroadcast` runs both for real with Ray actors, with each sender's uplink emulated by
pacing its sends at ``B`` bytes/s (one machine has no real WAN link to measure).
"""

from __future__ import annotations

import hashlib
import heapq
import math
import time
from collections.abc import Sequence
from typing import Any

__all__ = [
    "STRATEGIES",
    "RayBroadcast",
    "chain_time",
    "one_to_many_time",
    "simulate_broadcast",
]

STRATEGIES = ("one_to_many", "chain")


def one_to_many_time(n: int, model_bytes: float, bandwidth: float, latency: float = 0.0) -> float:
    """Closed form: ``N·M/B + L``."""
    return n * model_bytes / bandwidth + latency


def chain_time(
    n: int, model_bytes: float, bandwidth: float, chunk_bytes: float, latency: float = 0.0
) -> float:
    """Closed form: ``M/B + (N−1)·c/B + N·L`` (with ``c`` no larger than ``M``)."""
    c = min(chunk_bytes, model_bytes)
    return model_bytes / bandwidth + (n - 1) * c / bandwidth + n * latency


def simulate_broadcast(
    strategy: str,
    n: int,
    model_bytes: float,
    bandwidth: float | Sequence[float],
    chunk_bytes: float,
    latency: float = 0.0,
) -> float:
    """Seconds until all ``n`` workers hold the model, by discrete-event simulation.

    Args:
        strategy: ``one_to_many`` or ``chain``.
        bandwidth: uplink bytes/s of every node, or a list ``[learner, worker1, ..., workerN]``.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if n < 1:
        return 0.0
    bw = list(bandwidth) if isinstance(bandwidth, Sequence) else [float(bandwidth)] * (n + 1)
    if len(bw) != n + 1:
        raise ValueError(f"need {n + 1} bandwidths (learner + {n} workers), got {len(bw)}")
    k = max(1, math.ceil(model_bytes / chunk_bytes))
    sizes = [min(chunk_bytes, model_bytes - i * chunk_bytes) for i in range(k)]
    uplink_free = [0.0] * (n + 1)  # node 0 is the learner
    have = [0] * (n + 1)
    done = [0.0] * (n + 1)
    events: list[tuple[float, int, int, int]] = []  # (arrival time, seq, node, chunk)
    seq = 0

    def send(src: int, dst: int, chunk: int, ready: float) -> None:
        nonlocal seq
        start = max(ready, uplink_free[src])
        finish = start + sizes[chunk] / bw[src]
        uplink_free[src] = finish
        heapq.heappush(events, (finish + latency, seq, dst, chunk))
        seq += 1

    if strategy == "one_to_many":
        for dst in range(1, n + 1):
            for chunk in range(k):
                send(0, dst, chunk, 0.0)
    else:
        for chunk in range(k):
            send(0, 1, chunk, 0.0)
    while events:
        t, _, node, chunk = heapq.heappop(events)
        have[node] += 1
        if have[node] == k:
            done[node] = t
        if strategy == "chain" and node < n:
            send(node, node + 1, chunk, t)
    return max(done[1:])


class _Relay:
    """Ray actor body: collects chunks, optionally relays each to the next actor at ``B`` bytes/s."""

    def __init__(self, bandwidth: float, num_chunks: int) -> None:
        self.bandwidth = bandwidth
        self.num_chunks = num_chunks
        self.chunks: dict[int, bytes] = {}
        self.next: Any = None
        self.done_at: float | None = None

    def set_next(self, nxt: Any) -> None:
        self.next = nxt

    def receive(self, index: int, chunk: bytes) -> None:
        self.chunks[index] = chunk
        if len(self.chunks) == self.num_chunks:
            self.done_at = time.time()
        if self.next is not None:
            time.sleep(len(chunk) / self.bandwidth)  # our uplink is busy sending it on
            self.next.receive.remote(index, chunk)

    def result(self) -> tuple[float | None, str]:
        blob = b"".join(self.chunks[i] for i in sorted(self.chunks))
        return self.done_at, hashlib.sha256(blob).hexdigest()


class RayBroadcast:
    """Broadcast a byte string to ``n`` Ray actors, one-to-many or along a pipelined chain.

    Args:
        n: workers (Ray actors, ``num_cpus=0`` each).
        bandwidth: emulated uplink bytes/s of every sender.
        chunk_bytes: chunk size for the chain (one-to-many sends the same chunks, back to back).
    """

    def __init__(self, n: int, bandwidth: float, chunk_bytes: int) -> None:
        import ray

        if not ray.is_initialized():
            raise RuntimeError("start Ray first (ray.init or lynn.wrappers.echo.actor_learner.ray_init)")
        self._ray = ray
        self.n = n
        self.bandwidth = bandwidth
        self.chunk_bytes = chunk_bytes
        self._cls = ray.remote(_Relay).options(num_cpus=0)

    def run(self, strategy: str, payload: bytes) -> tuple[float, list[str]]:
        """Send ``payload``; return (seconds until the last worker has it all, each worker's sha256)."""
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        ray = self._ray
        chunks = [payload[i : i + self.chunk_bytes] for i in range(0, len(payload), self.chunk_bytes)]
        # Any: Ray's stubs type an actor's methods as plain callables (``.remote`` is added at run time).
        actors: list[Any] = [self._cls.remote(self.bandwidth, len(chunks)) for _ in range(self.n)]
        try:
            if strategy == "chain":
                ray.get([a.set_next.remote(b) for a, b in zip(actors, actors[1:], strict=False)])
            refs = [ray.put(c) for c in chunks]  # staged before the clock starts, like weights in memory
            ray.get([a.result.remote() for a in actors])  # actors up before the clock starts
            start = time.time()
            targets = actors[:1] if strategy == "chain" else actors
            for actor in targets:
                for i, (chunk, ref) in enumerate(zip(chunks, refs, strict=True)):
                    time.sleep(len(chunk) / self.bandwidth)  # the learner's uplink
                    actor.receive.remote(i, ref)
            while True:
                results = ray.get([a.result.remote() for a in actors])
                if all(r[0] is not None for r in results):
                    break
                time.sleep(0.005)
            return max(r[0] for r in results) - start, [r[1] for r in results]
        finally:
            for a in actors:
                ray.kill(a)
