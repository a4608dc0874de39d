"""Who may do what, and the trail of what admins changed: below every page and socket.

* :mod:`.roles` — operators and admins (Django groups);
* :mod:`.errors` — the refusals every layer raises; the API turns them into JSON 4xx
  with ``detail``, the sockets into close codes or error messages;
* :mod:`.devices` — which phones a user may run tasks on;
* :mod:`.audit` — the audit trail (:class:`~access.audit.AuditEntry`, :func:`record_audit`).

The agents' runtime, the devices app's screen socket and the front end's pages all take
these from here, so a rule is written once. Who may see a task or handle a ticket is
decided where tasks live (:mod:`agents.runtime.services.access`), on these roles.

May import: Django and the devices app's models. Never ``agents``, ``frontend`` or
``kairos_web``.
"""
