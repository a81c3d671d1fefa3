"""Reconstruction service: offline, deterministic continuation of a held invalid-read run.

The pure library lives in :mod:`services.reconstruction.domain` (no grpc, no database, no
network); :mod:`services.reconstruction.servicer` translates it to the gRPC contract; and
:mod:`services.reconstruction.worker_adapter` is the installed reference worker whose contract the
migration compares against. See :mod:`services.reconstruction.domain` for the library API.

This ``__init__`` stays import-light on purpose: the historical fixture generator imports the
worker adapter's registered identities under another SDK version.
"""
