"""Experience memory (issue 25): what an installation learned from its operators.

Pure Python, free of Django. :mod:`.screen` (signatures that survive changing content),
:mod:`.slots` (parameters of an instruction and binding them), :mod:`.memory` (entries,
the in-memory store, matching, learning), :mod:`.layer` (every backend uses it),
:mod:`.learning` (what production records teaches it). The database store lives with the
services (``agents/runtime/experience_store.py``).
"""
