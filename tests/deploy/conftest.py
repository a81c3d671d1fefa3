"""The deployment as parsed once per module, shared by the deployment tests."""

from tests.deploy.test_manifests import cluster, compose  # noqa: F401 - the fixtures, for every module here
