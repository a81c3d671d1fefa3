"""Candidate service: read-only evaluation of held runs and saved requests."""
