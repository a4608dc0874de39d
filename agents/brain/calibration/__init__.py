"""Measured confidence (issue 12; DESIGN "Confidence is measured, not asserted").

* :mod:`agents.brain.calibration.fit` — fitting evidence → P(right) with scikit-learn, ECE,
  leave-one-app-out splits, the γ suggestion (``manage.py calibrate``);
* :mod:`agents.brain.calibration.calibrator` — the fitted artefact and the map onto the
  OS-Kairos 1–5 scale (pure JSON at run time);
* :mod:`agents.brain.calibration.gate` — a backend behind its calibrator, as the gate reads it;
* :mod:`.drift` and :mod:`.refit` — when a calibrator no longer fits, and refitting one;
* :mod:`.experience` — the experience memory's confidence prior.

The labelled pairs these are fitted on come from the evaluation layer
(:mod:`agents.evaluation.probe`, :mod:`agents.evaluation.history`). Pure Python.
"""
