"""The brain: everything the agent decides, in pure Python.

Backends (:mod:`.backends`, the heuristic one a package of its own), the gate and guards
(:mod:`.loop`), measured confidence (:mod:`.calibration`, :mod:`.confidence`,
:mod:`.scoring`), the experience memory's matching (:mod:`.experience`), the sensitive-
action policy (:mod:`.safety`), planning, recommendation, prompts and tokens, the text
and element helpers, and the papers' metrics and their charts (:mod:`.metrics`,
:mod:`.plot`), which the review pages and the evaluation both draw.

May import: the standard library, third-party libraries other than Django, and the
devices layer's pure modules (the action schema, the UI tree, the protocol, the
simulator). Never Django, :mod:`agents.runtime`, :mod:`agents.evaluation`, the front end
or ``kairos_web``: every module here imports in a fresh interpreter with no
``DJANGO_SETTINGS_MODULE`` (tests/test_architecture.py).
"""
