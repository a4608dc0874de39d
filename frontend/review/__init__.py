"""The admins' review surface: intervention log, episode replay, metrics, calibration, export.

``words`` renders actions and decisions as people read them, ``log`` filters and pages
tickets, ``replay`` assembles an episode, ``views`` are the thin pages.
"""
