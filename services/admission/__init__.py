"""Admission service: validates operator submissions and coordinates the ledger's atomic append."""
