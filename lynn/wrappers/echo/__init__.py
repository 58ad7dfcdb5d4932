"""Echo: decoupled inference swarm (rollout workers) and training swarm (learner).

- :mod:`lynn.wrappers.echo.vector`: ``EchoVectorEnv``, a Gymnasium ``AsyncVectorEnv`` equivalent with
  an EnvPool-style async ``send``/``recv``, timeouts and opt-in restarts, and
  ``EchoRecordEpisodeStatistics`` (episode statistics that follow ``send``/``recv``).
- :mod:`lynn.wrappers.echo.sb3`: ``EchoSB3VecEnv``, the same as a Stable-Baselines3 ``VecEnv``.
- :mod:`lynn.wrappers.echo.actor_learner`: ``ActorLearner`` with ``pull`` / ``push_pull`` modes,
  bounded staleness, ``local`` and ``ray`` backends, weights published ``direct`` or through the
  pipelined ``chain`` broadcast (workers relay the snapshot's chunks).
- :mod:`lynn.wrappers.echo.capacity`: the capacity model and cost-aware worker activation.
- :mod:`lynn.wrappers.echo.broadcast`: one-to-many vs pipelined-chain weight broadcast (Ray) and
  its discrete-event simulator.

Submodules are imported on use (``lynn.wrappers.echo.vector`` etc.) to keep imports cheap.
"""
