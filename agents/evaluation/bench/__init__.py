"""``manage.py bench``: loop overhead (:mod:`.loop`), memory lookups (:mod:`.memory`),
prompt tokens (:mod:`.tokens`) and live streaming end to end (:mod:`.stream`).
Each prints its numbers; docs/benchmarks.md records them."""
