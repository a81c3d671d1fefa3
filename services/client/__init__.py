"""Python client and operator CLI of the invalid-read continuity services."""

from services.client.client import ContinuityClient

__all__ = ["ContinuityClient"]
