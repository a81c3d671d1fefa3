"""Every SQL statement of the ledger, one module per table group. Functions take a connection
inside the caller's transaction and never commit; rows come back as domain dataclasses."""
