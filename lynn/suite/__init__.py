"""The ``make run`` job (``lynn suite``): which agents run on which envs, with which models, and the leaderboard.

- :mod:`lynn.suite.plan`: the agents and episode budget of each env id on the leaderboard.
- :mod:`lynn.suite.run`: :class:`~lynn.suite.run.SuiteConfig` and :func:`~lynn.suite.run.run_suite`
  (every env × its agents, the zoo's models for agent ``lm`` and the imagined web, then the leaderboard
  and the imagined-vs-real table).
- :mod:`lynn.suite.heldout`: the held-out evaluation a trainer runs on its final model (handed to it by the CLI).
- :mod:`lynn.suite.lm`, :mod:`lynn.suite.worldmodel`: what ``--train`` builds instead of using the zoo
  (the suite LM; the page-memory world model and reward model), and the imagined-vs-real comparison.

This floor may import every room below it (envs, agents, eval, lm, the zoo); nothing imports it but
:mod:`lynn.cli` (a test of the import graph keeps it so).
"""

from __future__ import annotations
