"""The deploy files name exactly the services, ports, environment variables and commands the code
reads. Docker and Kubernetes cannot run where the tests run, so these checks are what keeps
deploy/Dockerfile, deploy/compose.yaml and deploy/k8s/ honest against shared/runtime/environment.py.

A service whose ``python -m services.<name>`` module does not exist yet fails here on purpose.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import grpc
import pytest
import yaml
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from packaging.specifiers import SpecifierSet

from services.gateway.config import GATEWAY
from services.gateway.config import SERVERS as GATEWAY_CALLS
from services.ledger.table_access import DEFAULT_LEDGER_ROLE
from shared.runtime.auth import PrincipalDirectory, Role
from shared.runtime.config import (
    DATABASE_VARIABLES,
    DEFAULT_GATEWAY_PORT,
    DEFAULT_PORTS,
    GATEWAY_PORT_VARIABLE,
    SERVICE_NAMES,
    database_settings,
    port_variable,
    target_variable,
)
from shared.runtime.environment import ENVIRONMENT
from shared.runtime.errors import DomainError
from shared.runtime.limits import DEFAULT_GRACE_SECONDS

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
DOCKERFILE = DEPLOY / "Dockerfile"
DOCKERIGNORE = DEPLOY / "Dockerfile.dockerignore"
COMPOSE = DEPLOY / "compose.yaml"

MIGRATE_MODULE = "services.ledger.migrate"
# Which services each service calls (design brief): exactly the targets it must be given.
CALLS: Mapping[str, tuple[str, ...]] = {
    "ledger": (),
    "reconstruction": (),
    "candidate": ("ledger", "reconstruction"),
    "admission": ("ledger", "candidate"),
}
# The one role of each calling service's own identity.
SERVICE_ROLES: Mapping[str, Role] = {
    "candidate": Role.CANDIDATE_SERVICE,
    "admission": Role.ADMISSION_SERVICE,
}
# Only the ledger (and its migrations) may reach the database.
DATABASE_URL = "FORGE_DATABASE_URL"
# Values that legitimately differ between compose (development) and Kubernetes (a real site).
SITE_SPECIFIC = {"OTEL_EXPORTER_OTLP_ENDPOINT", "FORGE_DATABASE_URL", "FORGE_SERVICE_TOKEN"}
# Set in Kubernetes only: nothing now; both run mutual TLS on every service port with the
# plaintext health port their probes need (ADR 0047). Kubernetes gives the token as a file instead.
K8S_ONLY: set[str] = set()
# Set in compose only: its well-known development credentials are accepted beyond loopback there
# (shared/runtime/development.py); Kubernetes must bring its own.
COMPOSE_ONLY = {"FORGE_DEVELOPMENT_MACHINE"}
TOKEN_FILE = "FORGE_SERVICE_TOKEN_FILE"
# The health name that answers SERVING while a process serves at all (shared.runtime.readiness).
LIVENESS = "liveness"
# Containers must listen beyond loopback: probes and peers connect to the container's address.
ALL_INTERFACES = "0.0.0.0"  # noqa: S104
COMPOSE_MIGRATE = "migrate"
COMPOSE_POSTGRES = "postgres"
COMPOSE_COLLECTOR = "otel-collector"


def python_m(module: str) -> list[str]:
    return ["python", "-m", module]


def why_not_runnable(module: str) -> str | None:
    """Why ``python -m module`` would fail from the repository's code, or None if it would run."""
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError as error:
        return f"`python -m {module}` would fail: {error}"
    if spec is None or spec.origin is None:
        return f"`python -m {module}` would fail: no module named {module!r}"
    if not Path(spec.origin).resolve().is_relative_to(ROOT / "services"):
        return f"{module} resolves to {spec.origin}, outside services/ (the image copies services/)"
    if spec.submodule_search_locations is not None:
        main = f"{module}.__main__"
        if importlib.util.find_spec(main) is None:
            return (
                f"`python -m {module}` would fail: {module} is a package without __main__.py "
                "(not written yet?)"
            )
    return None


def test_environment_lists_every_variable_the_code_reads() -> None:
    """The manifests are checked against shared.runtime.environment.ENVIRONMENT; that list must
    be complete."""
    pattern = re.compile(r"""["'](FORGE_[A-Z0-9_]+|OTEL_[A-Z0-9_]+)["']""")
    listed = ROOT / "shared" / "runtime" / "environment.py"
    sources = [
        path
        for path in (*(ROOT / "services").rglob("*.py"), *(ROOT / "shared").rglob("*.py"))
        if path != listed and "gen" not in path.relative_to(ROOT).parts
    ]
    read = {
        (match[1], str(path.relative_to(ROOT)))
        for path in sources
        for match in pattern.finditer(path.read_text(encoding="utf-8"))
    }
    unlisted = sorted((name, where) for name, where in read if name not in ENVIRONMENT)
    assert not unlisted, f"variables read by the code but missing from ENVIRONMENT: {unlisted}"


# ---------------------------------------------------------------------------------------------
# Dockerfile


@dataclass(frozen=True)
class Instruction:
    stage: int
    keyword: str
    value: str


def dockerfile_instructions() -> list[Instruction]:
    """Instructions, continuations joined and comments dropped; stage 0 starts at the first FROM."""
    logical: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        logical.append((pending + stripped).strip())
        pending = ""
    assert not pending, "Dockerfile ends inside a line continuation"
    args: dict[str, str] = {}
    stage = -1
    result = []
    for line in logical:
        keyword, _, value = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "ARG" and stage < 0:
            name, _, default = value.partition("=")
            args[name.strip()] = default.strip()
        if keyword == "FROM":
            stage += 1
            value = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args[m[1] or m[2]], value)
        result.append(Instruction(stage, keyword, value.strip()))
    return result


def final_stage() -> list[Instruction]:
    instructions = dockerfile_instructions()
    last = max(instruction.stage for instruction in instructions)
    return [instruction for instruction in instructions if instruction.stage == last]


def dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction in final_stage():
        if instruction.keyword == "ENV":
            for pair in shlex.split(instruction.value):
                name, _, value = pair.partition("=")
                env[name] = value
    return env


def dockerfile_user() -> tuple[int, int | None]:
    users = [i.value for i in final_stage() if i.keyword == "USER"]
    assert users, "the final Dockerfile stage has no USER: the services would run as root"
    user, _, group = users[-1].partition(":")
    assert user.isdigit(), f"USER {users[-1]!r} must be numeric so Kubernetes can verify non-root"
    return int(user), int(group) if group else None


def test_dockerfile_uses_the_python_the_project_requires() -> None:
    requires = SpecifierSet(
        re.search(r'requires-python\s*=\s*"([^"]+)"', (ROOT / "pyproject.toml").read_text())[1]  # type: ignore[index]
    )
    images = [i.value.split()[0] for i in dockerfile_instructions() if i.keyword == "FROM"]
    assert images, "Dockerfile has no FROM"
    for image in images:
        match = re.fullmatch(r"python:(\d+\.\d+)[-.\w]*", image)
        assert match, f"FROM {image}: expected an official python:X.Y image"
        assert requires.contains(match[1]), f"FROM {image}: pyproject requires-python {requires}"


def test_dockerfile_runs_as_a_non_root_numeric_user() -> None:
    uid, gid = dockerfile_user()
    assert uid != 0, "USER is root"
    assert gid != 0, "USER group is root"


def test_dockerfile_lets_the_command_choose_the_service() -> None:
    instructions = dockerfile_instructions()
    entrypoints = [i.value for i in instructions if i.keyword == "ENTRYPOINT"]
    assert not entrypoints, (
        f"ENTRYPOINT {entrypoints}: compose `command:` would be appended to it; "
        "the command alone must choose the service"
    )
    exposed = {
        int(p.split("/")[0])
        for i in final_stage()
        if i.keyword == "EXPOSE"
        for p in i.value.split()
    }
    expected = {*DEFAULT_PORTS.values(), DEFAULT_GATEWAY_PORT}
    assert exposed == expected, f"EXPOSE {sorted(exposed)} != DEFAULT_PORTS and the gateway port"


def test_dockerfile_puts_the_code_and_generated_protos_on_pythonpath() -> None:
    env = dockerfile_env()
    assert env.get("PYTHONPATH") == "/app:/app/shared/gen", f"PYTHONPATH={env.get('PYTHONPATH')!r}"
    assert (ROOT / "shared" / "gen" / "forge" / "continuity" / "v1").is_dir(), (
        "shared/gen/forge/continuity/v1 is missing: run `make protos`"
    )
    workdir = "/"
    copied: set[str] = set()
    for instruction in final_stage():
        if instruction.keyword == "WORKDIR":
            workdir = str(PurePosixPath(workdir, instruction.value))
        if instruction.keyword == "COPY":
            parts = [p for p in shlex.split(instruction.value) if not p.startswith("--")]
            copied.add(str(PurePosixPath(workdir, parts[-1])))
    for entry in env["PYTHONPATH"].split(":"):
        assert any(entry == c or entry.startswith(c + "/") for c in copied) or entry == workdir, (
            f"PYTHONPATH entry {entry} is not copied into the image (copied: {sorted(copied)})"
        )
    assert {"/app/shared", "/app/services"} <= copied, f"code not copied to /app: {sorted(copied)}"
    assert env.get("FORGE_HOST") in (None, ALL_INTERFACES), (
        "image FORGE_HOST must bind all interfaces"
    )
    for name in env:
        assert not name.startswith("FORGE_") or name in ENVIRONMENT, f"image sets unknown {name}"


def test_dockerfile_installs_the_hash_pinned_lock_then_the_project_alone() -> None:
    runs = [i.value for i in dockerfile_instructions() if i.keyword == "RUN"]
    installs = [part.strip() for run in runs for part in run.split("&&") if "pip install" in part]
    assert installs and all(
        "--require-hashes -r requirements.lock" in part or "--no-deps" in part for part in installs
    ), f"every pip install in the image takes the hash-pinned lock or no dependencies: {installs}"
    assert any("--require-hashes -r requirements.lock" in part for part in installs), (
        "the image must install its dependencies from requirements.lock with hashes (ADR 0050)"
    )
    assert any(re.search(r"--no-deps --no-build-isolation \.(\s|$)", p) for p in installs), (
        "the image must `pip install` the project without resolving anything more"
    )


def _ignore_regex(pattern: str) -> re.Pattern[str]:
    out = ""
    index = 0
    while index < len(pattern):
        if pattern.startswith("**", index):
            out += ".*"
            index += 2
        elif pattern[index] == "*":
            out += "[^/]*"
            index += 1
        elif pattern[index] == "?":
            out += "[^/]"
            index += 1
        else:
            out += re.escape(pattern[index])
            index += 1
    return re.compile(out + "(/.*)?")  # a matched directory excludes what is below it


def context_excludes(path: str) -> bool:
    """Whether deploy/Dockerfile.dockerignore keeps ``path`` (repository-relative) out of the build
    context: the last matching pattern wins, ``!`` re-includes."""
    excluded = False
    for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines():
        pattern = line.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        if _ignore_regex(pattern).fullmatch(path):
            excluded = not negate
    return excluded


def test_build_context_holds_what_the_image_copies_and_nothing_private() -> None:
    sources = []
    for instruction in dockerfile_instructions():
        if instruction.keyword == "COPY" and "--from" not in instruction.value:
            parts = shlex.split(instruction.value)
            sources += [p for p in parts[:-1] if not p.startswith("--")]
    assert sources, "Dockerfile copies nothing from the build context"
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
        assert not context_excludes(source.strip("/")), (
            f"COPY {source}: excluded by {DOCKERIGNORE.name}"
        )
    for private in (".venv/bin/python", ".git/config", "var/continuity.db", "var/principals.json"):
        assert context_excludes(private), f"{private} would be sent to the Docker build context"


# ---------------------------------------------------------------------------------------------
# compose


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(document, dict) and isinstance(document.get("services"), dict)
    return document


def compose_env(service: Mapping[str, Any]) -> dict[str, str]:
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        environment = dict(item.split("=", 1) for item in environment)
    return {str(k): "" if v is None else str(v) for k, v in environment.items()}


def compose_port(service: Mapping[str, Any], name: str) -> int:
    ports = service.get("ports") or []
    assert len(ports) == 1, f"compose {name}: expected one published port, got {ports}"
    parts = str(ports[0]).split(":")
    assert len(parts) == 3 and parts[0] == "127.0.0.1", (
        f"compose {name}: publish as 127.0.0.1:PORT:PORT (loopback only), got {ports[0]!r}"
    )
    assert parts[1] == parts[2], f"compose {name}: host and container port differ: {ports[0]!r}"
    return int(parts[2])


def test_compose_has_exactly_the_expected_services(compose: dict[str, Any]) -> None:
    expected = {*SERVICE_NAMES, GATEWAY, COMPOSE_MIGRATE, COMPOSE_POSTGRES, COMPOSE_COLLECTOR}
    assert set(compose["services"]) == expected


@pytest.mark.parametrize("name", SERVICE_NAMES)
def test_compose_service_runs_its_module(compose: dict[str, Any], name: str) -> None:
    command = compose["services"][name].get("command")
    assert command == python_m(f"services.{name}"), f"compose {name}: command {command!r}"
    problem = why_not_runnable(f"services.{name}")
    assert problem is None, problem


def test_compose_migration_runs_the_migrate_module(compose: dict[str, Any]) -> None:
    migrate = compose["services"][COMPOSE_MIGRATE]
    assert migrate.get("command") == python_m(MIGRATE_MODULE), (
        f"migrate command {migrate.get('command')!r}"
    )
    assert migrate.get("restart") == "no", 'the migration is one-shot: restart must be "no"'
    problem = why_not_runnable(MIGRATE_MODULE)
    assert problem is None, problem


@pytest.mark.parametrize("name", SERVICE_NAMES)
def test_compose_service_port_and_healthcheck(compose: dict[str, Any], name: str) -> None:
    service = compose["services"][name]
    port = DEFAULT_PORTS[name]
    assert compose_port(service, name) == port, f"compose {name}: published port != {port}"
    env = compose_env(service)
    assert env.get(port_variable(name)) in (None, str(port)), (
        f"compose {name}: {port_variable(name)}={env.get(port_variable(name))!r}, expected {port}"
    )
    test = service.get("healthcheck", {}).get("test")
    assert isinstance(test, list) and test[:3] == ["CMD", "python", "-c"], (
        f"compose {name}: healthcheck must be [CMD, python, -c, <grpc health script>, address]"
    )
    # The service port asks for a client certificate: the check asks the plaintext health port.
    health_port = env.get("FORGE_HEALTH_PORT")
    assert test[-1] == f"127.0.0.1:{health_port}", f"compose {name}: healthcheck probes {test[-1]}"
    assert "grpc_health.v1" in test[3], f"compose {name}: healthcheck is not a grpc.health.v1 check"


@pytest.fixture
def health_server() -> Iterator[tuple[str, health.HealthServicer]]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", servicer
    finally:
        server.stop(None)


def test_compose_healthcheck_script_really_checks_grpc_health(
    compose: dict[str, Any], health_server: tuple[str, health.HealthServicer]
) -> None:
    address, servicer = health_server
    script = compose["services"]["ledger"]["healthcheck"]["test"][3]

    def run() -> int:
        return subprocess.run(
            [sys.executable, "-c", script, address], check=False, capture_output=True, timeout=60
        ).returncode

    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    assert run() == 0, "healthcheck failed against a SERVING server"
    servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    assert run() != 0, "healthcheck passed against a NOT_SERVING server"


def test_compose_sets_only_variables_the_code_reads(compose: dict[str, Any]) -> None:
    for name in (*SERVICE_NAMES, COMPOSE_MIGRATE):
        unknown = set(compose_env(compose["services"][name])) - set(ENVIRONMENT)
        assert not unknown, (
            f"compose {name} sets variables shared/runtime/environment.py does not list: {unknown}"
        )


@pytest.mark.parametrize("name", SERVICE_NAMES)
def test_compose_service_binds_all_interfaces_and_targets_its_callees(
    compose: dict[str, Any], name: str
) -> None:
    env = compose_env(compose["services"][name])
    assert env.get("FORGE_HOST") == ALL_INTERFACES, (
        f"compose {name}: FORGE_HOST={env.get('FORGE_HOST')!r}"
    )
    for callee in CALLS[name]:
        assert target_variable(callee) in env, f"compose {name} calls {callee} but has no target"
    for callee in SERVICE_NAMES:
        if target_variable(callee) in env:
            expected = f"{callee}:{DEFAULT_PORTS[callee]}"
            assert env[target_variable(callee)] == expected, (
                f"compose {name}: {target_variable(callee)}={env[target_variable(callee)]!r}, "
                f"expected {expected} (the compose service name and its port)"
            )
            assert callee in compose["services"], f"no compose service {callee}"


#: The roles (name -> password) a compose init script creates: ``CREATE ROLE x LOGIN PASSWORD``.
_LOGIN_ROLE = re.compile(r"CREATE ROLE (\w+) LOGIN PASSWORD '([^']*)'")
INITDB = PurePosixPath("/docker-entrypoint-initdb.d")


def _compose_login_roles(compose: dict[str, Any]) -> dict[str, str]:
    """The roles the init scripts mounted into the compose PostgreSQL create, with passwords."""
    roles: dict[str, str] = {}
    for volume in compose["services"][COMPOSE_POSTGRES].get("volumes", []):
        source, _, target = str(volume).partition(":")
        if PurePosixPath(target.split(":")[0]).parent == INITDB:
            script = (COMPOSE.parent / source).read_text(encoding="utf-8")
            roles.update(_LOGIN_ROLE.findall(script))
    return roles


def test_compose_database_reaches_only_the_ledger(compose: dict[str, Any]) -> None:
    """The ledger and the migrations reach one database, each as its own role (ADR 0036): the
    migrations as the role that owns the database, the ledger as the restricted one."""
    services = compose["services"]
    holders = {
        n for n in (*SERVICE_NAMES, COMPOSE_MIGRATE) if DATABASE_URL in compose_env(services[n])
    }
    assert holders == {"ledger", COMPOSE_MIGRATE}, f"{DATABASE_URL} is given to {sorted(holders)}"
    urls = {n: urlsplit(compose_env(services[n])[DATABASE_URL]) for n in holders}
    postgres = compose_env(services[COMPOSE_POSTGRES])
    roles = _compose_login_roles(compose)
    for name, url in urls.items():
        assert url.scheme == "postgresql+psycopg", f"{name}: {DATABASE_URL} scheme {url.scheme}"
        assert url.hostname == COMPOSE_POSTGRES and (url.port or 5432) == 5432
        assert url.path.lstrip("/") == postgres["POSTGRES_DB"]
        assert url.username in roles, f"{name} logs in as {url.username}, no init script's role"
        assert url.password == roles[url.username]
    assert urls["ledger"].username == DEFAULT_LEDGER_ROLE
    assert urls[COMPOSE_MIGRATE].username not in {DEFAULT_LEDGER_ROLE, postgres["POSTGRES_USER"]}


def test_compose_service_tokens_are_in_the_principals_file(compose: dict[str, Any]) -> None:
    services = compose["services"]
    secrets = compose.get("secrets") or {}
    for name in SERVICE_NAMES:
        env = compose_env(services[name])
        assert ("FORGE_SERVICE_TOKEN" in env) == bool(CALLS[name]), (
            f"compose {name}: FORGE_SERVICE_TOKEN must be set exactly for services that call others"
        )
        mounts = {m["target"]: m["source"] for m in services[name].get("secrets", [])}
        path = env.get("FORGE_PRINCIPALS_FILE")
        assert path in mounts, (
            f"compose {name}: FORGE_PRINCIPALS_FILE={path!r} is not a mounted secret"
        )
        source = DEPLOY / secrets[mounts[path]]["file"]
        directory = PrincipalDirectory.load(source)
        if "FORGE_SERVICE_TOKEN" in env:
            try:
                principal = directory.authenticate(f"Bearer {env['FORGE_SERVICE_TOKEN']}")
            except DomainError as error:
                pytest.fail(f"compose {name}: {source.name} refuses its service token: {error}")
            assert principal.identity == name, (
                f"{name}'s token authenticates as {principal.identity}"
            )
            # One identity and role per calling service (the candidate's allows no write).
            assert principal.roles == {SERVICE_ROLES[name]}, f"{name} has {principal.roles}"


def test_compose_start_order(compose: dict[str, Any]) -> None:
    services = compose["services"]

    def conditions(name: str) -> dict[str, str]:
        return {k: v["condition"] for k, v in (services[name].get("depends_on") or {}).items()}

    assert conditions(COMPOSE_MIGRATE).get(COMPOSE_POSTGRES) == "service_healthy"
    assert conditions("ledger").get(COMPOSE_MIGRATE) == "service_completed_successfully", (
        "the ledger must start only after the migrations completed"
    )
    for name in SERVICE_NAMES:
        for callee in CALLS[name]:
            assert conditions(name).get(callee) == "service_healthy", (
                f"compose {name} must wait for {callee} to be healthy"
            )
        if compose_env(services[name]).get("OTEL_EXPORTER_OTLP_ENDPOINT"):
            assert COMPOSE_COLLECTOR in conditions(name), (
                f"compose {name} must start after the collector"
            )


def test_compose_tracing_reaches_the_collector(compose: dict[str, Any]) -> None:
    services = compose["services"]
    config_mounts = [
        v.split(":")
        for v in services[COMPOSE_COLLECTOR].get("volumes", [])
        if "otel-collector.yaml" in v
    ]
    assert len(config_mounts) == 1, "the collector must mount deploy/otel-collector.yaml"
    host_path, container_path = config_mounts[0][:2]
    assert (DEPLOY / host_path).is_file()
    assert f"--config={container_path}" in services[COMPOSE_COLLECTOR].get("command", [])
    config = yaml.safe_load((DEPLOY / host_path).read_text(encoding="utf-8"))
    receiver = config["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    receiver_port = int(receiver.rsplit(":", 1)[1])
    traces = config["service"]["pipelines"]["traces"]
    assert "otlp" in traces["receivers"], "the traces pipeline does not take the OTLP receiver"
    for kind in ("receivers", "processors", "exporters"):
        for component in traces.get(kind, []):
            assert component in config.get(kind, {}), (
                f"pipeline uses undefined {kind[:-1]} {component}"
            )
    service_names = set()
    for name in SERVICE_NAMES:
        env = compose_env(services[name])
        endpoint = urlsplit(env.get("OTEL_EXPORTER_OTLP_ENDPOINT", ""))
        assert (endpoint.scheme, endpoint.hostname, endpoint.port) == (
            "http",
            COMPOSE_COLLECTOR,
            receiver_port,
        ), f"compose {name}: OTEL_EXPORTER_OTLP_ENDPOINT={env.get('OTEL_EXPORTER_OTLP_ENDPOINT')!r}"
        service_names.add(env.get("OTEL_SERVICE_NAME"))
    assert None not in service_names and len(service_names) == len(SERVICE_NAMES), (
        f"each service needs its own OTEL_SERVICE_NAME, got {service_names}"
    )


def test_compose_builds_one_image_from_the_dockerfile(compose: dict[str, Any]) -> None:
    services = compose["services"]
    images = {services[n].get("image") for n in (*SERVICE_NAMES, COMPOSE_MIGRATE)}
    assert len(images) == 1 and None not in images, f"the forge services use images {images}"
    for name in (*SERVICE_NAMES, COMPOSE_MIGRATE):
        build = services[name].get("build") or {}
        context = (DEPLOY / build.get("context", ".")).resolve()
        assert context == ROOT, f"compose {name}: build context {context}, expected the repo root"
        assert (context / build.get("dockerfile", "Dockerfile")).resolve() == DOCKERFILE
        grace = services[name].get("stop_grace_period", "10s")
        seconds = float(str(grace).rstrip("s"))
        assert seconds > float(
            compose_env(services[name]).get("FORGE_GRACE_SECONDS", DEFAULT_GRACE_SECONDS)
        ), f"compose {name}: stop_grace_period {grace} does not leave time to drain"


# ---------------------------------------------------------------------------------------------
# Kubernetes


@dataclass(frozen=True)
class SecretRef:
    secret: str
    key: str


@dataclass
class Cluster:
    namespace: str
    kustomization: dict[str, Any]
    objects: dict[tuple[str, str], dict[str, Any]]

    def of_kind(self, kind: str) -> dict[str, dict[str, Any]]:
        return {name: obj for (k, name), obj in self.objects.items() if k == kind}

    def config_map(self, name: str) -> dict[str, str]:
        assert ("ConfigMap", name) in self.objects, (
            f"ConfigMap {name} is referenced but not defined"
        )
        return {k: str(v) for k, v in (self.objects["ConfigMap", name].get("data") or {}).items()}

    def secret_keys(self, name: str) -> set[str]:
        assert ("Secret", name) in self.objects, f"Secret {name} is referenced but not defined"
        secret = self.objects["Secret", name]
        return set(secret.get("stringData") or {}) | set(secret.get("data") or {})

    def secret_value(self, name: str, key: str) -> str:
        return str((self.objects["Secret", name].get("stringData") or {})[key])

    def container_env(self, container: dict[str, Any]) -> dict[str, str | SecretRef]:
        env: dict[str, str | SecretRef] = {}
        for source in container.get("envFrom", []):
            assert "prefix" not in source, "envFrom prefixes are not supported by this check"
            if "configMapRef" in source:
                env.update(self.config_map(source["configMapRef"]["name"]))
            elif "secretRef" in source:
                name = source["secretRef"]["name"]
                env.update({key: SecretRef(name, key) for key in self.secret_keys(name)})
            else:
                raise AssertionError(f"unsupported envFrom {source}")
        for entry in container.get("env", []):
            if "value" in entry:
                env[entry["name"]] = str(entry["value"])
                continue
            reference = entry.get("valueFrom", {})
            if "configMapKeyRef" in reference:
                ref = reference["configMapKeyRef"]
                data = self.config_map(ref["name"])
                assert ref["key"] in data, f"ConfigMap {ref['name']} has no key {ref['key']}"
                env[entry["name"]] = data[ref["key"]]
            elif "secretKeyRef" in reference:
                ref = reference["secretKeyRef"]
                assert ref["key"] in self.secret_keys(ref["name"]), (
                    f"Secret {ref['name']} has no key {ref['key']}"
                )
                env[entry["name"]] = SecretRef(ref["name"], ref["key"])
            else:
                raise AssertionError(f"unsupported env entry {entry}")
        return env


@pytest.fixture(scope="module")
def cluster() -> Cluster:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text(encoding="utf-8"))
    objects: dict[tuple[str, str], dict[str, Any]] = {}
    for resource in kustomization.get("resources", []):
        path = K8S / resource
        assert path.is_file(), f"kustomization lists {resource}, which does not exist"
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if document is None:
                continue
            key = (document["kind"], document["metadata"]["name"])
            assert key not in objects, f"{key} defined twice"
            objects[key] = document
    return Cluster(kustomization.get("namespace", ""), kustomization, objects)


def deployment_container(cluster: Cluster, name: str) -> dict[str, Any]:
    deployments = cluster.of_kind("Deployment")
    assert name in deployments, f"no Deployment {name}"
    containers: list[dict[str, Any]] = deployments[name]["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, f"Deployment {name}: expected one container"
    return containers[0]


def the_job(cluster: Cluster) -> dict[str, Any]:
    jobs = cluster.of_kind("Job")
    assert len(jobs) == 1, f"expected exactly one Job (the migrations), got {sorted(jobs)}"
    return next(iter(jobs.values()))


def test_kustomization_lists_every_manifest(cluster: Cluster) -> None:
    listed = set(cluster.kustomization.get("resources", []))
    present = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present, f"kustomization resources {sorted(listed)} != files {sorted(present)}"


def test_everything_lives_in_the_namespace(cluster: Cluster) -> None:
    namespaces = cluster.of_kind("Namespace")
    assert list(namespaces) == [cluster.namespace], f"Namespace objects {list(namespaces)}"
    for (kind, name), obj in cluster.objects.items():
        if kind != "Namespace":
            assert obj["metadata"].get("namespace") == cluster.namespace, f"{kind}/{name} namespace"


def test_one_deployment_and_service_per_service(cluster: Cluster) -> None:
    assert set(cluster.of_kind("Deployment")) == {*SERVICE_NAMES, GATEWAY}
    assert set(cluster.of_kind("Service")) == {*SERVICE_NAMES, GATEWAY}


@pytest.mark.parametrize("name", SERVICE_NAMES)
def test_deployment_runs_its_module(cluster: Cluster, name: str) -> None:
    container = deployment_container(cluster, name)
    assert "args" not in container, f"Deployment {name}: use `command` only"
    assert container.get("command") == python_m(f"services.{name}"), (
        f"Deployment {name}: command {container.get('command')!r}"
    )
    problem = why_not_runnable(f"services.{name}")
    assert problem is None, problem


@pytest.mark.parametrize("name", SERVICE_NAMES)
def test_deployment_ports_and_grpc_probes(cluster: Cluster, name: str) -> None:
    """The service port, and the plaintext health port every probe uses (kubelet's gRPC probes
    cannot speak TLS); liveness and start-up ask the "liveness" name, so a process waiting for
    a dependency (the ledger for its schema) is kept out of the endpoints but not restarted."""
    port = DEFAULT_PORTS[name]
    container = deployment_container(cluster, name)
    env = cluster.container_env(container)
    health_port = int(str(env.get("FORGE_HEALTH_PORT", "0")))
    assert health_port, f"Deployment {name}: FORGE_HEALTH_PORT unset"
    ports = container.get("ports", [])
    assert [p["containerPort"] for p in ports] == [port, health_port], (
        f"Deployment {name}: ports {ports}"
    )
    expected = {"readinessProbe": "", "livenessProbe": LIVENESS, "startupProbe": LIVENESS}
    for probe, service in expected.items():
        spec = container.get(probe, {}).get("grpc", {})
        assert spec.get("port") == health_port and spec.get("service", "") == service, (
            f"Deployment {name}: {probe} must ask {service or 'the overall status'!r} on the "
            f"health port {health_port}, got {container.get(probe)}"
        )
    assert env.get(port_variable(name), str(port)) == str(port), (
        f"Deployment {name}: {port_variable(name)}={env.get(port_variable(name))!r}"
    )


@pytest.mark.parametrize("name", SERVICE_NAMES)
def test_service_selects_its_deployment_on_its_port(cluster: Cluster, name: str) -> None:
    service = cluster.of_kind("Service")[name]
    deployments = cluster.of_kind("Deployment")
    selector = service["spec"]["selector"]
    selected = [
        d
        for d, obj in deployments.items()
        if selector.items() <= obj["spec"]["template"]["metadata"]["labels"].items()
    ]
    assert selected == [name], f"Service {name} selects Deployments {selected}"
    deployment = deployments[name]["spec"]
    assert (
        deployment["selector"]["matchLabels"].items()
        <= deployment["template"]["metadata"]["labels"].items()
    )
    container = deployment_container(cluster, name)
    [service_port] = service["spec"]["ports"]
    assert service_port["port"] == DEFAULT_PORTS[name], (
        f"Service {name} port {service_port['port']}"
    )
    target = service_port.get("targetPort", service_port["port"])
    container_port = {p.get("name"): p["containerPort"] for p in container["ports"]}
    resolved = container_port.get(target) if isinstance(target, str) else target
    assert resolved == DEFAULT_PORTS[name], f"Service {name} targetPort {target!r} -> {resolved}"


def k8s_containers(cluster: Cluster) -> Iterator[tuple[str, dict[str, Any]]]:
    for name in (*SERVICE_NAMES, GATEWAY):
        yield f"Deployment {name}", deployment_container(cluster, name)
    for container in the_job(cluster)["spec"]["template"]["spec"]["containers"]:
        yield "migration Job", container


def test_k8s_sets_only_variables_the_code_reads(cluster: Cluster) -> None:
    for where, container in k8s_containers(cluster):
        unknown = set(cluster.container_env(container)) - set(ENVIRONMENT)
        assert not unknown, (
            f"{where} sets variables shared/runtime/environment.py does not list: {unknown}"
        )
    unknown = set().union(*(cluster.config_map(n) for n in cluster.of_kind("ConfigMap"))) - set(
        ENVIRONMENT
    )
    assert not unknown, f"ConfigMap keys shared/runtime/environment.py does not list: {unknown}"


def service_host(target: str, namespace: str) -> tuple[str, int]:
    host, _, port = target.rpartition(":")
    parts = host.split(".")
    allowed_suffixes: list[list[str]] = [
        [],
        [namespace],
        [namespace, "svc"],
        [namespace, "svc", "cluster", "local"],
    ]
    assert parts[1:] in allowed_suffixes, f"target {target} is not a Service in {namespace}"
    return parts[0], int(port)


@pytest.mark.parametrize("name", SERVICE_NAMES)
def test_k8s_service_binds_all_interfaces_and_targets_its_callees(
    cluster: Cluster, name: str
) -> None:
    env = cluster.container_env(deployment_container(cluster, name))
    assert env.get("FORGE_HOST") == ALL_INTERFACES, (
        f"Deployment {name}: FORGE_HOST={env.get('FORGE_HOST')!r}; "
        "probes and Services reach the pod IP, not loopback"
    )
    for callee in CALLS[name]:
        assert target_variable(callee) in env, f"Deployment {name} calls {callee} but has no target"
    services = cluster.of_kind("Service")
    for callee in SERVICE_NAMES:
        target = env.get(target_variable(callee))
        if target is None:
            continue
        assert isinstance(target, str), f"{target_variable(callee)} should not be secret"
        host, port = service_host(target, cluster.namespace)
        assert host == callee and host in services, (
            f"Deployment {name}: {target_variable(callee)}={target}"
        )
        assert port == DEFAULT_PORTS[callee] == services[host]["spec"]["ports"][0]["port"], (
            f"Deployment {name}: {target_variable(callee)}={target}, Service {callee} port differs"
        )


def test_k8s_database_reaches_only_the_ledger_and_migrations(cluster: Cluster) -> None:
    refs = {}
    for where, container in k8s_containers(cluster):
        value = cluster.container_env(container).get(DATABASE_URL)
        if value is not None:
            assert isinstance(value, SecretRef), f"{where}: {DATABASE_URL} must come from a Secret"
            refs[where] = value
    assert set(refs) == {"Deployment ledger", "migration Job"}, (
        f"{DATABASE_URL} given to {sorted(refs)}"
    )
    # Each its own role (ADR 0036), in a Secret the other does not read.
    ledger, migrations = refs["Deployment ledger"], refs["migration Job"]
    assert ledger.secret != migrations.secret, f"ledger and migrations share a Secret: {refs}"
    urls = {ref: urlsplit(cluster.secret_value(ref.secret, ref.key)) for ref in refs.values()}
    for ref, url in urls.items():
        assert url.scheme == "postgresql+psycopg", f"Secret {ref.secret}/{ref.key}: {url.scheme}"
    assert urls[ledger].username == DEFAULT_LEDGER_ROLE
    assert urls[migrations].username != DEFAULT_LEDGER_ROLE
    assert (urls[ledger].hostname, urls[ledger].path) == (
        urls[migrations].hostname,
        urls[migrations].path,
    ), "the ledger and its migrations must reach one database"


# PostgreSQL's default max_connections less its superuser_reserved_connections.
POSTGRES_CONNECTION_BUDGET = 100 - 3


def test_the_ledger_database_settings_are_set_where_the_ledger_runs_and_fit_the_server(
    compose: dict[str, Any], cluster: Cluster
) -> None:
    """Every FORGE_DB_* setting is given to the ledger, explicitly and valid, in compose and in
    Kubernetes (test_compose_and_k8s_run_the_same_commands_with_the_same_settings checks they
    agree), to no other service; and the Kubernetes ledger replicas' connections fit within
    PostgreSQL's default connection limit."""
    variables = set(DATABASE_VARIABLES.values())
    given: dict[str, Mapping[str, object]] = {
        "compose ledger": compose_env(compose["services"]["ledger"]),
        "Deployment ledger": cluster.container_env(deployment_container(cluster, "ledger")),
    }
    for where, env in given.items():
        assert variables <= set(env), f"{where} lacks {sorted(variables - set(env))}"
        values = {k: v for k, v in env.items() if k in variables}
        assert all(isinstance(v, str) for v in values.values()), f"{where}: {values}"
        database_settings({k: str(v) for k, v in values.items()})  # raises when malformed
    others: dict[str, Mapping[str, object]] = {
        **{f"compose {n}": compose_env(svc) for n, svc in compose["services"].items()},
        **{where: cluster.container_env(c) for where, c in k8s_containers(cluster)},
    }
    holders = sorted(where for where, env in others.items() if variables & set(env))
    assert holders == sorted(given), f"FORGE_DB_* given to {holders}"
    env = given["Deployment ledger"]
    settings = database_settings({k: str(v) for k, v in env.items() if k in variables})
    spec = cluster.of_kind("Deployment")["ledger"]["spec"]
    surge = spec.get("strategy", {}).get("rollingUpdate", {}).get("maxSurge", 1)
    assert isinstance(surge, int), "the ledger's maxSurge must be a number of pods"
    replicas = int(spec.get("replicas", 1)) + surge  # during a rollout
    connections = replicas * (settings.pool_size + settings.max_overflow)
    assert connections <= POSTGRES_CONNECTION_BUDGET, (
        f"{replicas} ledger replicas may open {connections} PostgreSQL connections, more than "
        f"the {POSTGRES_CONNECTION_BUDGET} a default server accepts"
    )


@pytest.mark.parametrize("name", SERVICE_NAMES)
def test_k8s_service_token_and_principals(cluster: Cluster, name: str) -> None:
    container = deployment_container(cluster, name)
    env = cluster.container_env(container)
    assert "FORGE_SERVICE_TOKEN" not in env, f"Deployment {name}: the token comes as a file"
    token_file = env.get(TOKEN_FILE)
    assert (token_file is not None) == bool(CALLS[name]), (
        f"Deployment {name}: {TOKEN_FILE} must be set exactly for services that call others"
    )
    if token_file is not None:
        secret, key = secret_file(cluster, name, str(token_file))
        assert secret == "forge-service-tokens", f"Deployment {name}: token from {secret}"
        assert key == name, f"Deployment {name} presents another service's token ({key})"
    path = env.get("FORGE_PRINCIPALS_FILE")
    assert isinstance(path, str) and path, f"Deployment {name}: FORGE_PRINCIPALS_FILE unset"
    directory, filename = str(PurePosixPath(path).parent), PurePosixPath(path).name
    pod = cluster.of_kind("Deployment")[name]["spec"]["template"]["spec"]
    mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
    assert directory in mounts, f"Deployment {name}: nothing mounted at {directory}"
    volume = {v["name"]: v for v in pod.get("volumes", [])}[mounts[directory]]
    assert "secret" in volume, f"Deployment {name}: the principals file must come from a Secret"
    secret = volume["secret"]["secretName"]
    assert filename in cluster.secret_keys(secret), f"Secret {secret} has no key {filename}"
    document = json.loads(cluster.secret_value(secret, filename))
    PrincipalDirectory.from_document(document)  # the services must be able to start with it
    identities = {p["identity"]: p for p in document["principals"]}
    for caller in (n for n in SERVICE_NAMES if CALLS[n]):
        roles = identities.get(caller, {}).get("roles", [])
        assert roles == [SERVICE_ROLES[caller].value], (
            f"Secret {secret}: the {caller} principal must hold exactly its own role "
            f"{SERVICE_ROLES[caller].value}, not {roles}"
        )


def secret_file(cluster: Cluster, name: str, path: str) -> tuple[str, str]:
    """(Secret, key) of the file at ``path`` in Deployment ``name``'s container."""
    container = deployment_container(cluster, name)
    pod = cluster.of_kind("Deployment")[name]["spec"]["template"]["spec"]
    directory, filename = str(PurePosixPath(path).parent), PurePosixPath(path).name
    mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
    assert directory in mounts, f"Deployment {name}: nothing mounted at {directory}"
    volume = {v["name"]: v for v in pod.get("volumes", [])}[mounts[directory]]
    assert "secret" in volume, f"Deployment {name}: {path} must come from a Secret"
    secret = volume["secret"]["secretName"]
    items = {i["path"]: i["key"] for i in volume["secret"].get("items", [])}
    key = items.get(filename, filename) if items else filename
    assert key in cluster.secret_keys(secret), f"Secret {secret} has no key {key} for {path}"
    return secret, key


def test_k8s_placeholder_secrets_are_marked(cluster: Cluster) -> None:
    for name, secret in cluster.of_kind("Secret").items():
        for key, value in (secret.get("stringData") or {}).items():
            assert "REPLACE_ME" in str(value), (
                f"Secret {name}/{key} holds a value not marked REPLACE_ME"
            )


def test_k8s_migration_job_runs_the_migrate_module(cluster: Cluster) -> None:
    job = the_job(cluster)
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container.get("command") == python_m(MIGRATE_MODULE), (
        f"Job command {container.get('command')!r}"
    )
    assert pod.get("restartPolicy") in ("Never", "OnFailure"), (
        "a Job needs restartPolicy Never/OnFailure"
    )
    problem = why_not_runnable(MIGRATE_MODULE)
    assert problem is None, problem


def test_k8s_pods_are_locked_down_and_sized(cluster: Cluster) -> None:
    uid, gid = dockerfile_user()
    pods = {
        f"Deployment {n}": d["spec"]["template"]["spec"]
        for n, d in cluster.of_kind("Deployment").items()
    }
    pods["migration Job"] = the_job(cluster)["spec"]["template"]["spec"]
    for where, pod in pods.items():
        security = pod.get("securityContext", {})
        assert security.get("runAsNonRoot") is True, f"{where}: runAsNonRoot"
        assert security.get("runAsUser") == uid, f"{where}: runAsUser != image USER {uid}"
        if gid is not None:
            assert security.get("runAsGroup") == gid, f"{where}: runAsGroup != image group {gid}"
        assert pod.get("automountServiceAccountToken") is False, f"{where}: needs no API token"
        for container in pod["containers"]:
            context = container.get("securityContext", {})
            assert context.get("allowPrivilegeEscalation") is False, (
                f"{where}: privilege escalation"
            )
            assert context.get("readOnlyRootFilesystem") is True, (
                f"{where}: writable root filesystem"
            )
            assert context.get("capabilities", {}).get("drop") == ["ALL"], f"{where}: capabilities"
            resources = container.get("resources", {})
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(resources.get(bound, {})), f"{where}: {bound}"
        if where.startswith("Deployment"):
            container_env = cluster.container_env(pod["containers"][0])
            grace = float(str(container_env.get("FORGE_GRACE_SECONDS", DEFAULT_GRACE_SECONDS)))
            assert pod.get("terminationGracePeriodSeconds", 30) > grace, (
                f"{where}: terminationGracePeriodSeconds leaves no time to drain {grace}s"
            )


def test_k8s_uses_one_image(cluster: Cluster) -> None:
    images = {c["image"].split(":")[0] for _, c in k8s_containers(cluster)}
    assert images == {"forge-continuity"}, f"containers use images {images}"
    names = {i["name"] for i in cluster.kustomization.get("images", [])}
    assert names == {"forge-continuity"}, "kustomization `images` must name forge-continuity"


# ---------------------------------------------------------------------------------------------
# compose and Kubernetes agree


def _agreement_pairs(
    compose: dict[str, Any], cluster: Cluster
) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    for name in SERVICE_NAMES:
        yield name, compose["services"][name], deployment_container(cluster, name)
    [job_container] = the_job(cluster)["spec"]["template"]["spec"]["containers"]
    yield "migrations", compose["services"][COMPOSE_MIGRATE], job_container


def test_compose_and_k8s_run_the_same_commands_with_the_same_settings(
    compose: dict[str, Any], cluster: Cluster
) -> None:
    for name, service, container in _agreement_pairs(compose, cluster):
        assert service.get("command") == container.get("command"), f"{name}: commands differ"
        compose_vars = {k: v for k, v in compose_env(service).items() if k not in COMPOSE_ONLY}
        k8s_vars = {k: v for k, v in cluster.container_env(container).items() if k not in K8S_ONLY}
        if TOKEN_FILE in k8s_vars:  # the same token, given as a file
            k8s_vars["FORGE_SERVICE_TOKEN"] = k8s_vars.pop(TOKEN_FILE)
        assert set(compose_vars) == set(k8s_vars), textwrap.dedent(
            f"""\
            {name}: compose and Kubernetes set different variables
              only compose:    {sorted(set(compose_vars) - set(k8s_vars))}
              only Kubernetes: {sorted(set(k8s_vars) - set(compose_vars))}"""
        )
        for variable in set(compose_vars) - SITE_SPECIFIC:
            assert compose_vars[variable] == k8s_vars[variable], (
                f"{name}: {variable} is {compose_vars[variable]!r} in compose, "
                f"{k8s_vars[variable]!r} in Kubernetes"
            )
        if name in DEFAULT_PORTS:
            assert (
                compose_port(service, name)
                == deployment_container(cluster, name)["ports"][0]["containerPort"]
            )


def test_compose_and_k8s_use_the_same_image_and_user(
    compose: dict[str, Any], cluster: Cluster
) -> None:
    compose_image = compose["services"]["ledger"]["image"]
    k8s_image = deployment_container(cluster, "ledger")["image"]
    assert compose_image.split(":")[0] == k8s_image.split(":")[0], f"{compose_image} vs {k8s_image}"


# ---------------------------------------------------------------------------------------------
# the HTTP gateway: its own module, HTTP port and probes; the targets of the servers it calls; no
# identity, database or principals of its own (callers' tokens pass through)

GATEWAY_OWN_NOTHING = (DATABASE_URL, "FORGE_SERVICE_TOKEN", "FORGE_PRINCIPALS_FILE")


def _check_gateway_env(where: str, env: Mapping[str, object], host_of: dict[str, str]) -> None:
    assert env.get("FORGE_HOST") == ALL_INTERFACES, f"{where}: FORGE_HOST={env.get('FORGE_HOST')!r}"
    assert env.get(GATEWAY_PORT_VARIABLE, str(DEFAULT_GATEWAY_PORT)) == str(DEFAULT_GATEWAY_PORT)
    targets = {name for name in SERVICE_NAMES if target_variable(name) in env}
    assert targets == set(GATEWAY_CALLS), f"{where}: targets {sorted(targets)} != {GATEWAY_CALLS}"
    for callee in GATEWAY_CALLS:
        assert env[target_variable(callee)] == f"{host_of[callee]}:{DEFAULT_PORTS[callee]}", (
            f"{where}: {target_variable(callee)}={env[target_variable(callee)]!r}"
        )
    for variable in GATEWAY_OWN_NOTHING:
        assert variable not in env, f"{where}: the gateway must not be given {variable}"
    unknown = set(env) - set(ENVIRONMENT)
    assert not unknown, (
        f"{where} sets variables shared/runtime/environment.py does not list: {unknown}"
    )


def test_compose_gateway(compose: dict[str, Any]) -> None:
    service = compose["services"][GATEWAY]
    assert service.get("command") == python_m(f"services.{GATEWAY}")
    problem = why_not_runnable(f"services.{GATEWAY}")
    assert problem is None, problem
    assert compose_port(service, GATEWAY) == DEFAULT_GATEWAY_PORT
    assert not service.get("secrets"), "compose gateway: mounts no principals"
    _check_gateway_env("compose gateway", compose_env(service), {n: n for n in SERVICE_NAMES})
    conditions = {k: v["condition"] for k, v in (service.get("depends_on") or {}).items()}
    assert conditions == dict.fromkeys(GATEWAY_CALLS, "service_healthy"), conditions
    test = service.get("healthcheck", {}).get("test")
    assert test[:3] == ["CMD", "python", "-c"], test
    assert test[-1] == f"https://127.0.0.1:{DEFAULT_GATEWAY_PORT}/healthz", test


def test_compose_gateway_healthcheck_really_checks_http(compose: dict[str, Any]) -> None:
    import http.server
    import threading

    script = compose["services"][GATEWAY]["healthcheck"]["test"][3]
    answer = {"status": 200}

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(answer["status"] if self.path == "/healthz" else 404)
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/healthz"

    def run() -> int:
        return subprocess.run(
            [sys.executable, "-c", script, url], check=False, capture_output=True, timeout=60
        ).returncode

    try:
        assert run() == 0, "healthcheck failed against a healthy gateway"
        answer["status"] = 503
        assert run() != 0, "healthcheck passed against an unhealthy gateway"
    finally:
        server.shutdown()
        server.server_close()


def test_k8s_gateway(cluster: Cluster) -> None:
    container = deployment_container(cluster, GATEWAY)
    assert container.get("command") == python_m(f"services.{GATEWAY}")
    [port] = container["ports"]
    assert port["containerPort"] == DEFAULT_GATEWAY_PORT
    # Readiness follows the servers the gateway calls; liveness only the process itself, so a
    # ledger outage takes gateway pods out of the endpoints instead of restarting them in a loop.
    for probe, path in (
        ("startupProbe", "/healthz"),
        ("readinessProbe", "/healthz"),
        ("livenessProbe", "/livez"),
    ):
        check = container[probe].get("httpGet", {})
        assert check.get("path") == path, f"gateway {probe}: {container[probe]}"
        assert check.get("scheme") == "HTTPS", f"gateway {probe}: the listener speaks HTTPS"
        assert check.get("port") in (port["name"], DEFAULT_GATEWAY_PORT), f"gateway {probe}"
    assert not container.get("volumeMounts") or all(
        "principals" not in m["mountPath"] for m in container["volumeMounts"]
    )
    services = cluster.of_kind("Service")
    env = cluster.container_env(container)
    _check_gateway_env("Deployment gateway", env, {n: n for n in SERVICE_NAMES})
    for callee in GATEWAY_CALLS:
        assert services[callee]["spec"]["ports"][0]["port"] == DEFAULT_PORTS[callee]
    [service_port] = services[GATEWAY]["spec"]["ports"]
    assert service_port["port"] == DEFAULT_GATEWAY_PORT
    assert service_port.get("targetPort") in (port["name"], DEFAULT_GATEWAY_PORT)


def test_compose_and_k8s_run_the_same_gateway(compose: dict[str, Any], cluster: Cluster) -> None:
    service = compose["services"][GATEWAY]
    container = deployment_container(cluster, GATEWAY)
    assert service["command"] == container["command"]
    composed = compose_env(service)
    deployed = {k: v for k, v in cluster.container_env(container).items() if k not in K8S_ONLY}
    # The collector's address is the site's; both export spans somewhere.
    assert composed.get("OTEL_EXPORTER_OTLP_ENDPOINT") and deployed.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    assert {k: v for k, v in composed.items() if k not in SITE_SPECIFIC} == {
        k: v for k, v in deployed.items() if k not in SITE_SPECIFIC
    }


# ---------------------------------------------------------------------------------------------
# The reconciliation verifier (docs/adr/0017-local-process-cessation-verifier.md)

VERIFIER = "FORGE_RECONCILIATION_VERIFIER"


def _compose_shares_ledger_pids(compose: dict[str, Any]) -> bool:
    services = compose["services"]
    return services["ledger"].get("pid") == "host" or any(
        s.get("pid") == "service:ledger" for n, s in services.items() if n != "ledger"
    )


def _k8s_shares_ledger_pids(cluster: Cluster) -> bool:
    pod = cluster.of_kind("Deployment")["ledger"]["spec"]["template"]["spec"]
    return bool(pod.get("hostPID") or pod.get("shareProcessNamespace"))


def test_the_ledger_is_given_a_verifier_its_platform_can_back(
    compose: dict[str, Any], cluster: Cluster
) -> None:
    """Every deployment names its verifier, it loads, and ``local-process`` only where a worker
    can share the ledger's pid namespace (else it would look pids up in the wrong table)."""
    from services.ledger.domain.verifier import ReconciliationVerifier, load_verifier

    settings = {
        "compose": (
            compose_env(compose["services"]["ledger"]).get(VERIFIER),
            _compose_shares_ledger_pids(compose),
        ),
        "Kubernetes": (
            cluster.container_env(deployment_container(cluster, "ledger")).get(VERIFIER),
            _k8s_shares_ledger_pids(cluster),
        ),
    }
    for where, (value, shared_pids) in settings.items():
        assert isinstance(value, str) and value, f"{where}: the ledger sets no {VERIFIER}"
        assert isinstance(load_verifier(value), ReconciliationVerifier), where
        if value == "local-process":
            assert shared_pids, f"{where}: local-process without a shared pid namespace"
    for name in SERVICE_NAMES:
        if name != "ledger":
            assert VERIFIER not in compose_env(compose["services"][name]), name


def test_make_run_proves_cessation_of_its_local_workers() -> None:
    """`make run` starts the services on this host, where the reference worker runs too."""
    from services import runner
    from services.ledger.domain.verifier import load_verifier
    from services.ledger.local_process_verifier import LocalProcessVerifier

    assert runner.VERIFIER_VARIABLE == VERIFIER
    assert isinstance(load_verifier(runner.LOCAL_PROCESS_VERIFIER), LocalProcessVerifier)
