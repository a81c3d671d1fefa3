"""`python -m services.client`: the operator CLI."""

from __future__ import annotations

from services.client.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
