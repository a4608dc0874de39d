"""The agent, in three layers (docs/architecture.md), each a package that says what it
may import; ``make test`` checks the rules with import-linter (``.importlinter``):

* :mod:`agents.brain` — what the agent decides, in pure Python: backends, the gate and
  guards, the experience memory's matching, calibration maths, the safety policy,
  planning, recommendation, confidence, tokens, metrics. Imports no Django.
* :mod:`agents.runtime` — the Django app labelled ``agents``: models, services (one module
  per kind of change), Celery tasks, sockets, events, recovery, learning from handoffs,
  training data, retention. Imports the brain, never evaluation or the front end.
* :mod:`agents.evaluation` — suites, episodes, probing, datasets, ``evaluate --learn`` and
  the benchmarks, with their commands. It may import everything; nothing in production
  imports it.
"""
