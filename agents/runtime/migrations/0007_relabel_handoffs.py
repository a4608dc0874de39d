"""Issue 24, item 1: labels and element names of the records written before it.

An edit identical to the proposal was stored as "the agent was wrong", a take-over had no
action and was always wrong, and a picked element was named by its internal id
(``Tapped 'node-2'``). ``agents.training.relabel`` rewrites them from the steps' own
screens; nothing is undone on the way back (the old labels were wrong).
"""
from django.db import migrations


def forwards(apps, schema_editor):
    from agents.runtime.training.relabel import relabel

    relabel(apps)


class Migration(migrations.Migration):

    dependencies = [
        ("agents", "0006_labels_spot_checks_verdicts"),
    ]

    operations = [
        migrations.RunPython(forwards, migrations.RunPython.noop),
    ]
