"""The Celery app: workers run one agent step per task (``agents.runtime.tasks``)."""
import os

from celery import Celery, bootsteps

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kairos_web.settings")

app = Celery("kairos_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()  # agents.runtime.tasks: the runtime is the Django app

# Every worker (and the embedded default's worker thread) sweeps for tasks whose worker
# died mid-step: see agents/recovery.py.
from agents.runtime.recovery import StallSweeper  # noqa: E402  (imports no Django models)

app.steps["worker"].add(StallSweeper)

# The evidence calibrators refit themselves from the installation's labels
# (agents/runtime/learning.py): after every KAIROS_REFIT_EVERY new labels (enqueued when a ticket
# is resolved) and nightly. The full stack runs the nightly one with celery beat
# (docker-compose's ``beat`` service); the embedded default has no beat, so its worker
# thread runs it on a timer (``NightlyRefit``).
from celery.schedules import crontab  # noqa: E402

from agents.runtime.task_names import REFIT_CALIBRATORS  # noqa: E402

app.conf.beat_schedule = {
    "refit-calibrators-nightly": {
        "task": REFIT_CALIBRATORS,
        "schedule": crontab(hour=3, minute=30),
        "kwargs": {"trigger": "nightly"},
    },
}


class NightlyRefit(bootsteps.StartStopStep):
    """The embedded default's stand-in for beat: every 24 hours after the worker starts,
    enqueue the nightly refit (a no-op for a backend without new labels)."""

    PERIOD_SECONDS = 24 * 3600

    def __init__(self, worker, **kwargs):
        super().__init__(worker, **kwargs)
        import threading

        self.stopping = threading.Event()

    def start(self, worker):
        import threading

        from django.conf import settings

        if not getattr(settings, "EMBEDDED", False):
            return  # the full stack has beat
        threading.Thread(target=self._run, daemon=True, name="nightly-refit").start()

    def stop(self, worker):
        self.stopping.set()

    def _run(self):
        while not self.stopping.wait(self.PERIOD_SECONDS):
            try:
                app.send_task(REFIT_CALIBRATORS, kwargs={"trigger": "nightly"})
            except Exception:  # the next night tries again
                import logging

                logging.getLogger(__name__).exception("could not enqueue the nightly refit")


app.steps["worker"].add(NightlyRefit)


def start_worker_thread(queues: list[str] | None = None):
    """Run a Celery worker on a thread of this process; returns it (``.stop()`` ends it).

    The embedded default's ``serve`` runs its agent steps this way, and so do the
    benchmarks that time a step's hand-off through the broker. The pool is ``solo``: the
    in-memory transport's bookkeeping is not thread-safe, and with a thread pool acking
    from its own threads a message now and then waited the consumer's full 2 s drain
    timeout before it was picked up. Steps therefore run one at a time here; the full
    stack's worker processes run them in parallel.
    """
    import threading

    built = threading.Event()
    holder: list = []

    def run() -> None:
        # Built on its own thread: the solo pool announces worker_process_init, whose
        # Django fixup closes database connections, which is refused on an event loop.
        worker = app.WorkController(
            pool_cls="solo", concurrency=1, loglevel="WARNING",
            without_heartbeat=True, without_mingle=True, without_gossip=True,
            hostname=f"embedded-{os.getpid()}@kairos", queues=queues,
        )
        holder.append(worker)
        built.set()
        worker.start()

    threading.Thread(target=run, daemon=True, name="celery-worker").start()
    built.wait(30)
    return holder[0]
