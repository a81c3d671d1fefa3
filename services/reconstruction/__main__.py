"""`python -m services.reconstruction`: serve the stateless reconstruction service."""

from __future__ import annotations

import sys

from services.reconstruction.servicer import bindings
from shared.continuity.serving import profile_preflight
from shared.runtime.auth import PrincipalsFile
from shared.runtime.bootstrap import BuildResult, run_service
from shared.runtime.config import Settings


def main(argv: list[str] | None = None) -> int:
    def build(settings: Settings, _principals: PrincipalsFile) -> BuildResult:
        return BuildResult(bindings(), lambda: None)

    return run_service(
        "reconstruction",
        argv if argv is not None else sys.argv[1:],
        build,
        preflight=profile_preflight,
    )


if __name__ == "__main__":
    raise SystemExit(main())
