"""`python -m services.candidate`: serve the read-only candidate service."""

from __future__ import annotations

import sys

from services.candidate.domain import EvaluationMemory
from services.candidate.downstream import GrpcCandidateSources
from services.candidate.servicer import bindings
from shared.continuity.serving import profile_preflight
from shared.contract.channels import service_channel
from shared.runtime.auth import PrincipalsFile
from shared.runtime.bootstrap import BuildResult, run_service
from shared.runtime.config import Settings
from shared.runtime.metrics import cache_families, export_at_scrape


def build(settings: Settings, _principals: PrincipalsFile) -> BuildResult:
    """Channels to the ledger and reconstruction under this service's own identity."""
    ledger = service_channel(settings, "ledger")
    reconstruction = service_channel(settings, "reconstruction")

    def close() -> None:
        ledger.close()
        reconstruction.close()

    sources = GrpcCandidateSources(ledger, reconstruction)
    evaluations = EvaluationMemory()
    # The hit rates of the remembered reconstruction answers (ADR 0028), journals (ADR 0030)
    # and candidates read before their admission (ADR 0066).
    export_at_scrape(
        "candidate_cache",
        lambda: cache_families(
            "forge_candidate_cache",
            {
                "analysis_and_reconstruction": sources.answers,
                "run_snapshot": sources.journals,
                "evaluation": evaluations,
            },
        ),
    )
    return BuildResult(bindings(sources, evaluations=evaluations), close)


def main(argv: list[str] | None = None) -> int:
    return run_service(
        "candidate",
        argv if argv is not None else sys.argv[1:],
        build,
        depends_on=("ledger", "reconstruction"),
        preflight=profile_preflight,
    )


if __name__ == "__main__":
    raise SystemExit(main())
