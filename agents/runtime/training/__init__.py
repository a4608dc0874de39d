"""Training data from logged work: labels, the model's prompt and target, export formats.

OS-Kairos trains the agent to emit ``action || score`` (Sec. 4.2, Eq. 3); the handoffs
people resolve are the labels (approve: the agent was right; edit / take over: wrong).
``labels`` and ``samples`` are pure Python; ``export`` reads the database.
"""
