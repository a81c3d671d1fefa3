"""The deployment as parsed once per module, shared by the deployment tests."""

from tests.deploy.test_manifests import cluster  # noqa: F401 - the fixture, for every module here
