"""Experience memory (issue 25): what an installation learned from its operators.

Pure Python, free of Django. :mod:`.screen` (signatures that survive changing content),
:mod:`.slots` (parameters of an instruction and binding them), :mod:`.memory` (matching
and learning) over :mod:`.templates` (what a remembered action targets),
:mod:`.step_keys` (what makes two steps the same) and :mod:`.store` (entries and the
in-memory store), :mod:`.layer` (every backend uses it), :mod:`.learning` (what
production records teaches it). The database store lives with the services
(:mod:`agents.runtime.experience_store`).
"""
