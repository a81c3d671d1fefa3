"""Validate the Kubernetes manifests against the Kubernetes API's JSON schemas, offline.

    python tools/validate_k8s.py [deploy/k8s]

The manifests are rendered as ``kubectl apply -k`` would (``kustomize build`` or ``kubectl
kustomize``, whichever is installed); without either, each file the kustomization lists is
validated as written. Every object is checked, strictly (an unknown field is an error: a typo
would otherwise be dropped silently by the API server), against the oldest Kubernetes version the
deployment supports and the newest the validator knows. The schemas ship with the
``kubernetes-validate`` package, so no network is needed. Exit status 1 names every problem.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

DEFAULT_DIRECTORY = Path(__file__).resolve().parents[1] / "deploy" / "k8s"
#: The oldest Kubernetes minor release the manifests support (gRPC probes are GA since 1.27).
OLDEST_SUPPORTED = "1.27.0"


def _rendered(directory: Path) -> str | None:
    """The kustomization rendered by an installed kustomize, or None without one."""
    for command in (["kustomize", "build"], ["kubectl", "kustomize"]):
        if shutil.which(command[0]):
            done = subprocess.run(
                [*command, str(directory)], capture_output=True, text=True, check=False, timeout=120
            )
            if done.returncode != 0:
                raise SystemExit(f"{' '.join(command)} {directory} failed:\n{done.stderr}")
            return done.stdout
    return None


def documents(directory: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, object) for every object the kustomization in ``directory`` deploys."""
    rendered = _rendered(directory)
    if rendered is not None:
        for document in yaml.safe_load_all(rendered):
            if document:
                yield "rendered kustomization", document
        return
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text(encoding="utf-8"))
    for resource in kustomization.get("resources", []):
        text = (directory / resource).read_text(encoding="utf-8")
        for document in yaml.safe_load_all(text):
            if document:
                yield resource, document


def problems(directory: Path) -> list[str]:
    """Every schema violation in the manifests under ``directory`` (empty when valid)."""
    found: list[str] = []
    versions = sorted({OLDEST_SUPPORTED, kubernetes_validate.latest_version()})
    for where, document in documents(directory):
        name = f"{document.get('kind', '?')}/{(document.get('metadata') or {}).get('name', '?')}"
        for version in versions:
            try:
                kubernetes_validate.validate(document, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                path = ".".join(str(part) for part in error.path) or "(top)"
                found.append(f"{where}: {name} (Kubernetes {version}): {path}: {error.message}")
            except kubernetes_validate.SchemaNotFoundError:
                found.append(f"{where}: {name}: no schema for {document.get('apiVersion')}")
    return found


def main(argv: list[str]) -> int:
    directory = Path(argv[0]) if argv else DEFAULT_DIRECTORY
    found = problems(directory)
    for problem in found:
        print(problem, file=sys.stderr)
    if not found:
        print(f"{directory}: every manifest is valid")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
