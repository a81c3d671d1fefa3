"""`python -m services.candidate`: serve the candidate service."""

from __future__ import annotations

import sys

from services.candidate.servicer import bindings
from shared.bootstrap import run_service
from shared.config import Settings


def main(argv: list[str] | None = None) -> int:
    def build(settings: Settings):  # type: ignore[no-untyped-def]
        return bindings(), lambda: None

    return run_service("candidate", argv if argv is not None else sys.argv[1:], build)


if __name__ == "__main__":
    raise SystemExit(main())
