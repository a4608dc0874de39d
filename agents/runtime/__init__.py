"""The runtime: the Django app labelled ``agents`` (``apps.AgentsConfig``).

Models (:mod:`.models`), the services that change them (:mod:`.services`, one module per
kind of change), Celery tasks (:mod:`.tasks`), the task and operator sockets
(:mod:`.consumers`), events, recovery of stalled work, learning from handoffs and the
experience store, calibrator refits, training data and its export (:mod:`.training`),
retention, and the production commands (``run_task``, ``export_training``, ``purge``).

May import: Django, Celery, Channels, the brain (:mod:`agents.brain`), the devices layer
and the shared access module (:mod:`access`). Never :mod:`agents.evaluation`, the front
end or ``kairos_web``.
"""
