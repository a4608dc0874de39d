"""Logging filters named in settings.LOGGING (no Django imports: loaded while logging is
configured)."""
from __future__ import annotations

import logging


class NoTracebackFor403(logging.Filter):
    """A 403 is a refusal working as designed (a staff member without a permission in the
    admin, a missing CSRF token): one warning line, not a traceback that reads like a
    crash (issue 23.7)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == 403:
            record.exc_info = None
            record.exc_text = None
        return True
