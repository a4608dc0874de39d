"""Evaluation: how well the agent does, measured offline.

Simulated suites across γ (:mod:`.suites`), one episode (:mod:`.episode`), dataset replay
(:mod:`.datasets`), ``evaluate --learn`` (:mod:`.learning`), collaborative probing and
labelled history for calibration (:mod:`.probe`, :mod:`.history`), the benchmarks
(:mod:`.bench`), and their commands (``evaluate``, ``evaluate_dataset``, ``probe``,
``calibrate``, ``fit_experience_prior``, ``bench``): a Django app labelled
``evaluation`` with no models, installed so those commands are found.

May import anything: the brain, the runtime, the devices layer, ``kairos_web``.
Production code (the runtime, the front end, devices, ``kairos_web``) never imports it.
"""
