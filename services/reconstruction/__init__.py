"""Reconstruction service: offline, deterministic continuation of a held invalid-read run.

The pure library lives in :mod:`services.reconstruction.domain` (no grpc, no database, no
network); :mod:`services.reconstruction.servicer` translates it to the gRPC contract. The installed
reference worker whose contract the migration compares against, the sealed replay and the resume
of a derived checkpoint live in :mod:`shared.agent`, which the worker and the demo use too. See
:mod:`services.reconstruction.domain` for the library API.
"""
