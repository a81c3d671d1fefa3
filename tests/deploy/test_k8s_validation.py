"""The Kubernetes manifests validate against the Kubernetes API's schemas (tools/validate_k8s.py,
run by `make lint`), and the validator refuses a broken manifest."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR = ROOT / "tools" / "validate_k8s.py"
K8S = ROOT / "deploy" / "k8s"


def _validate(
    directory: Path, *, without_kustomize: bool = False
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if without_kustomize:
        # Only the interpreter's directory: neither kustomize nor kubectl is found.
        env["PATH"] = str(Path(sys.executable).parent)
    return subprocess.run(
        [sys.executable, str(VALIDATOR), str(directory)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )


def test_the_manifests_validate() -> None:
    done = _validate(K8S)
    assert done.returncode == 0, done.stderr


def _broken(tmp_path: Path, file: str, old: str, new: str) -> Path:
    copy = tmp_path / "k8s"
    shutil.copytree(K8S, copy)
    text = (copy / file).read_text(encoding="utf-8")
    assert old in text
    (copy / file).write_text(text.replace(old, new, 1), encoding="utf-8")
    return copy


def test_a_wrong_type_is_refused(tmp_path: Path) -> None:
    done = _validate(_broken(tmp_path, "ledger.yaml", "replicas: 2", 'replicas: "two"'))
    assert done.returncode == 1
    assert "Deployment/ledger" in done.stderr and "spec.replicas" in done.stderr


def test_a_misspelt_field_is_refused(tmp_path: Path) -> None:
    # The API server would drop an unknown field silently: the pod would never drain first.
    done = _validate(_broken(tmp_path, "candidate.yaml", "preStop:", "preStopp:"))
    assert done.returncode == 1
    assert "Deployment/candidate" in done.stderr and "preStopp" in done.stderr


def test_without_kustomize_every_listed_file_is_validated(tmp_path: Path) -> None:
    assert _validate(K8S, without_kustomize=True).returncode == 0
    broken = _broken(tmp_path, "pdb.yaml", "maxUnavailable: 1", "maxUnavailable: [1]")
    done = _validate(broken, without_kustomize=True)
    assert done.returncode == 1
    assert "pdb.yaml: PodDisruptionBudget/ledger" in done.stderr
