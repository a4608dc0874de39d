"""Refused requests, raised by any layer and shown by the page, API or socket that asked."""
from __future__ import annotations


class ServiceError(Exception):
    """A refused request; views turn it into a JSON 4xx with ``detail``."""

    status = 400

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


class NotFound(ServiceError):
    status = 404


class Forbidden(ServiceError):
    status = 403


class Conflict(ServiceError):
    status = 409


class TooMany(ServiceError):
    status = 429


class DeviceUnavailable(ServiceError):
    """The phone did not answer: nothing is wrong with the request; try again later."""

    status = 503
