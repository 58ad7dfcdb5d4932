"""DynaWeb (arXiv 2601.22149): a web agent trained by reinforcement learning in a learned world model,
with real expert trajectories interleaved. One module per part:

- :mod:`.config` — :class:`DynaWebConfig`, the run's options (``lynn train dynaweb`` flags come from it);
- :mod:`.rollouts` — groups of ``G`` rollouts per task in ``Lynn/WebWorldModel-v0`` (batched imagination
  with ``WebWorldModelEnv.step_batch``) or on the real ``Lynn/LiveWeb-v0`` (the live-RL baseline);
- :mod:`.expert` — the LiveWeb expert's train-split trajectories and the interleaving ratio;
- :mod:`.branches` — rollouts started at the expert's recorded train states (``branch_ratio``, MBPO-style);
- :mod:`.learner` — rows with group-normalised advantages through the one GRPO/GSPO loss of
  :mod:`lynn.agents.llm.grpo` (GSPO by default; how expert steps enter it, and why, is said there);
- :mod:`.train` — the loop, checkpoints, resume, learning curve, run summary (and why TRL's
  ``GRPOTrainer`` does not drive it);
- :mod:`.agent` — ``--agent dynaweb`` for ``lynn eval``.
"""

from __future__ import annotations

from lynn.agents.dynaweb.config import DynaWebConfig

__all__ = ["DynaWebConfig"]
