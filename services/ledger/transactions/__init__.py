"""The ledger's transactions, one module per transaction family. Each public function is one
database transaction that re-checks every precondition itself (expected head, revision,
uniqueness) instead of trusting the caller. Unique constraints, not in-process locks, make
concurrent writers safe, so several ledger replicas against one PostgreSQL stay correct."""
