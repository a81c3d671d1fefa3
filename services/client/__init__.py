"""Python client and operator CLI of the invalid-read continuity services."""

from services.client.client import ContinuityClient
from services.client.heads import HeadsFile

__all__ = ["ContinuityClient", "HeadsFile"]
