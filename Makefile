# Forge continuity — every developer and CI entry point.
# `make run` and `make test` install everything they need on a fresh machine.

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NODE_STAMP := tools/node_modules/.installed
GEN := shared/gen
PROTO_FILES := $(wildcard protos/forge/continuity/v1/*.proto)

export PYTHONPATH := $(CURDIR):$(CURDIR)/$(GEN):$(CURDIR)/tools/audit
export PYTHONDONTWRITEBYTECODE := 1
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: help install lock chromium pgbouncer faketime promtool guarantees run run-mtls certs test test-database host-controls reliability model-check scale lint typecheck protos protos-check openapi openapi-check bench bench-repeat bench-admission bench-hops bench-append bench-candidate bench-worker bench-followers bench-listing bench-policy-lock bench-micro profile demo clean db-upgrade fixtures fixtures-check vectors vectors-check

help:
	@echo "make run        start the four services and the HTTP gateway on SQLite (var/continuity.db)"
	@echo "make run-mtls   make run with mutual TLS (certificates from make certs; gateway on HTTPS)"
	@echo "make certs      a development CA and certificates per service and role under var/certs"
	@echo "make test       install everything and run the test suite (SQLite + PostgreSQL)"
	@echo "make lint       ruff, buf lint, proto drift check, Kubernetes manifest schemas"
	@echo "make typecheck  mypy"
	@echo "make lock       resolve the hash-pinned lock files again after a dependency change"
	@echo "make protos     regenerate Python code from protos/"
	@echo "make openapi    regenerate docs/openapi.json (the gateway's OpenAPI document) from protos/"
	@echo "make bench      the five performance figures beside in-run baselines (PostgreSQL)"
	@echo "make bench-repeat     make bench three times in a row; every run and whether they agree: bench/results/three-runs.json"
	@echo "make bench-admission  figure 1 (admission) alone, ~6 min: bench/results/admission.json"
	@echo "make bench-hops       per hop, what an admission, a worker-path step and an append move, parse, hash and write (counted): bench/results/hops*.json"
	@echo "make bench-append     figure 3 (appends) in three separate runs; the median is the figure: bench/results/append.json"
	@echo "make bench-candidate  figure 2 (candidate reads up to 100,000 entries) alone: bench/results/candidate.json"
	@echo "make bench-worker     the worker-path figure alone: bench/results/worker.json"
	@echo "make bench-followers  100 journal followers over two ledgers while 8 writers append: bench/results/followers.json"
	@echo "make bench-policy-lock  the policy lock's wait and hold by mode under admissions and the worker path: bench/results/policy-lock.json"
	@echo "make bench-listing    figure 6 (listing 10,000 runs) alone, ~1 min: bench/results/listing.json"
	@echo "make profile    py-spy samples of every service under admission load"
	@echo "make host-controls the reference worker as a process against real services, every variant"
	@echo "make reliability faults, races and hostile input at full counts (docs/reliability.md)"
	@echo "make model-check   the spec model against the real services, and the history checker"
	@echo "make scale      two ledger replicas on one PostgreSQL, directly and behind PgBouncer, full counts"
	@echo "make demo       the whole v1 story against make run (or services it starts itself)"
	@echo "make db-upgrade apply ledger migrations to FORGE_DATABASE_URL (default var/continuity.db)"
	@echo "make fixtures   regenerate the historical SDK fixtures (byte-identical; fixtures-check verifies)"
	@echo "make vectors    regenerate the audit bundle conformance vectors (byte-identical; vectors-check verifies)"

# Every package from the hash-pinned lock (ADR 0050), then the project alone: nothing is resolved
# or fetched unpinned, the build system included. `make lock` regenerates the lock on purpose.
PIP_INSTALL := $(PY) -m pip install --quiet --disable-pip-version-check
$(STAMP): pyproject.toml requirements-dev.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) --require-hashes -r requirements-dev.lock
	$(PIP_INSTALL) --no-deps --no-build-isolation -e .
	touch $(STAMP)

# After a change to pyproject.toml's dependencies: resolve requirements.lock (the image) and
# requirements-dev.lock (make, CI) again with uv, hashes included (tools/lock.py). Pins stay
# unless pyproject.toml moves them; LOCK_UPGRADE="NAME ..." moves those packages on purpose.
lock: $(STAMP)
	$(PY) tools/lock.py $(foreach name,$(LOCK_UPGRADE),--upgrade-package $(name))

# The console's browser tests need Chromium from the distribution's packages (tests/console);
# FORGE_CHROMIUM names another Chromium executable instead.
CHROMIUM := $(shell command -v chromium 2>/dev/null)
chromium:
ifeq ($(CHROMIUM)$(FORGE_CHROMIUM),)
	@echo "installing chromium (Debian packages chromium, chromium-driver) for the console's browser tests"
	$(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	$(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
endif

# The replica scenarios run once through a real PgBouncer, which the tests start themselves
# (tests/scale/pgbouncer.py); Debian installs it in /usr/sbin. FORGE_PGBOUNCER names another.
PGBOUNCER := $(shell command -v pgbouncer 2>/dev/null || ls /usr/sbin/pgbouncer 2>/dev/null)
pgbouncer:
ifeq ($(PGBOUNCER)$(FORGE_PGBOUNCER),)
	@echo "installing pgbouncer (Debian package pgbouncer) for the replica tests behind PgBouncer"
	$(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	$(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null
endif

# The skewed-clock scenarios run a ledger replica under libfaketime (tests/reliability/faketime.py),
# from the Debian package faketime. FORGE_LIBFAKETIME names another library.
LIBFAKETIME := $(wildcard /usr/lib/*/faketime/libfaketime.so.1 /usr/lib/faketime/libfaketime.so.1)
faketime:
ifeq ($(LIBFAKETIME)$(FORGE_LIBFAKETIME),)
	@echo "installing libfaketime (Debian package faketime) for the skewed-clock scenarios"
	$(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	$(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime >/dev/null
endif

# The alert rules are tested with promtool (tests/deploy/test_alert_rules.py), from the Debian
# package prometheus. FORGE_PROMTOOL names another.
PROMTOOL := $(shell command -v promtool 2>/dev/null)
promtool:
ifeq ($(PROMTOOL)$(FORGE_PROMTOOL),)
	@echo "installing promtool (Debian package prometheus) for the alert rule tests"
	$(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	$(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
endif

$(NODE_STAMP): tools/package.json
	cd tools && npm install --no-audit --no-fund --silent
	touch $(NODE_STAMP)

install: $(STAMP)

protos: $(STAMP)
	rm -rf $(GEN)/forge && mkdir -p $(GEN)
	$(PY) -m grpc_tools.protoc -I protos \
	  --python_out=$(GEN) --grpc_python_out=$(GEN) --mypy_out=$(GEN) --mypy_grpc_out=$(GEN) \
	  $(PROTO_FILES)
	for d in $(GEN)/forge $(GEN)/forge/continuity $(GEN)/forge/continuity/v1; do touch $$d/__init__.py; done

protos-check: $(STAMP)
	@tmp=$$(mktemp -d) && cp -r $(GEN) $$tmp/before && \
	  { $(MAKE) --no-print-directory -s protos >$$tmp/log 2>&1 || { cat $$tmp/log; exit 1; }; } && \
	  if diff -r -x __pycache__ $$tmp/before $(GEN) >/dev/null; then echo "generated code matches protos/"; rm -rf $$tmp; \
	  else diff -r -x __pycache__ $$tmp/before $(GEN) | head -20; echo "generated code drifted from protos/: run 'make protos' and commit"; rm -rf $$tmp; exit 1; fi

# The gateway's OpenAPI document, generated from the google.api.http annotations.
openapi: $(STAMP)
	$(PY) -m services.gateway.openapi docs/openapi.json

openapi-check: $(STAMP)
	$(PY) -m services.gateway.openapi --check docs/openapi.json

lint: $(STAMP) $(NODE_STAMP) protos-check openapi-check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	tools/node_modules/.bin/buf lint
	$(PY) tools/validate_k8s.py deploy/k8s
	$(PY) tools/lock.py --check

typecheck: $(STAMP)
	$(VENV)/bin/mypy

db-upgrade: $(STAMP)
	$(PY) -m services.ledger.migrate

run: $(STAMP)
	$(PY) -m services.runner

# `make run` with mutual TLS: each service its certificate from `make certs`, client certificates
# required, the gateway on HTTPS (docs/adr/0047-mutual-tls-everywhere.md).
run-mtls: certs
	$(PY) -m services.runner --certs $(CERTS_DIR)

# A development CA and one certificate per service and calling role, under var/certs (ignored by
# git); existing files are kept (FORCE=1 issues everything anew). compose mounts them.
CERTS_DIR ?= var/certs
certs: $(STAMP)
	$(PY) -m shared.runtime.dev_certificates $(CERTS_DIR) $(if $(FORCE),--force)

test: $(STAMP) $(NODE_STAMP) chromium pgbouncer faketime promtool test-database
	$(MAKE) --no-print-directory lint typecheck
	$(PY) -m pytest -q

# The dedicated PostgreSQL test database (FORGE_TEST_POSTGRES_URL, default forge_continuity_test;
# a name not ending in _test is refused), created if missing. Fails loudly, naming why, when
# PostgreSQL is unreachable: the PostgreSQL variants never skip silently.
test-database: $(STAMP)
	PYTHONPATH=.:shared/gen $(PY) -m tests.support

# The host controls at full size: the reference worker as its own process against the real
# services, every variant, on SQLite and PostgreSQL (make test runs the first variant of each).
host-controls: $(STAMP) test-database
	FORGE_HOST_CONTROLS=full CI=true $(PY) -m pytest -q -o timeout=1800 tests/host_controls

# The reliability scenarios at full counts (make test runs a fast slice of each). Figures are
# printed and appended to var/reliability.jsonl; any broken invariant fails the target.
reliability: $(STAMP) faketime
	mkdir -p var && rm -f var/reliability.jsonl
	FORGE_RELIABILITY_SCALE=full FORGE_RELIABILITY_RESULTS=var/reliability.jsonl CI=true \
	  $(PY) -m pytest -q -s -o timeout=3600 tests/reliability
	$(MAKE) --no-print-directory model-check

# The spec model against the real services, and the independent history checker, for a budget of
# sequences and steps (docs/reliability.md, "The model and the history checker"; make test runs a
# small budget). Prints sequences, calls checked, histories checked, divergences and anomalies.
# The fault target (ADR 0058) restarts processes: fewer sequences, FORGE_MODEL_FAULT_EXAMPLES.
FORGE_MODEL_EXAMPLES ?= 300
FORGE_MODEL_FAULT_EXAMPLES ?= 60
FORGE_MODEL_STEPS ?= 60
model-check: $(STAMP) pgbouncer faketime
	FORGE_MODEL_EXAMPLES=$(FORGE_MODEL_EXAMPLES) FORGE_MODEL_STEPS=$(FORGE_MODEL_STEPS) CI=true \
	  FORGE_MODEL_FAULT_EXAMPLES=$(FORGE_MODEL_FAULT_EXAMPLES) \
	  $(PY) -m pytest -q -s -o timeout=3600 tests/model

# The replica scenarios at full counts (make test runs a fast slice): two ledger processes on one
# PostgreSQL schema with two lanes, under both isolation defaults and behind PgBouncer. Figures
# are printed and written to var/scale.jsonl; any broken invariant fails the target.
scale: $(STAMP) pgbouncer
	mkdir -p var && rm -f var/scale.jsonl
	FORGE_SCALE=full FORGE_SCALE_RESULTS=var/scale.jsonl CI=true \
	  $(PY) -m pytest -q -s -o timeout=3600 tests/scale

# The five figures beside their in-run baselines, on PostgreSQL (FORGE_BENCH_POSTGRES_URL, default
# the local server's database `test`): bench/results/latest.json and candidate_latency.png.
# Each guarantee the docs lean on, removed in a scratch copy of the tree, with the test that must
# then fail (tools/guarantees.py); exits 1 when a removal goes unnoticed.
guarantees: $(STAMP)
	$(PY) tools/guarantees.py

bench: $(STAMP)
	$(PY) -m bench

# Three consecutive `make bench` runs on this machine (FORGE_BENCH_REPEAT_RUNS to change the
# count): each run's summary, the medians, and whether every run's median lies inside the other
# runs' spreads: bench/results/three-runs.json (the last run's latest.json is kept).
bench-repeat: $(STAMP)
	$(PY) -m bench.repeat

# The policy lock's wait and hold times by mode (ADR 0049): bench/results/policy-lock.json.
bench-policy-lock: $(STAMP)
	$(PY) -m bench policy-lock

# Figure 1 alone (admission beside its baselines, three rounds): bench/results/admission.json.
bench-admission: $(STAMP)
	$(PY) -m bench admission

# Per hop, what one admission moves, parses, hashes and writes, counted (not timed; issue 50):
# bench/results/hops.json; the same per step of the worker path and per journal append:
# bench/results/hops-worker.json; the tables of docs/performance.md.
bench-hops: $(STAMP)
	$(PY) -m bench.hops
	$(PY) -m bench.hops_worker

# Figure 3 (journal appends) in three separate runs on freshly started services, each the
# median of three rounds; the median of the runs is the figure: bench/results/append.json.
bench-append: $(STAMP)
	$(PY) -m bench append

# Figure 2 alone (candidate reads of journals of 100 to 100,000 entries):
# bench/results/candidate.json.
bench-candidate: $(STAMP)
	$(PY) -m bench candidate

# The worker-path figure alone (8 workers' ledger calls beside the baseline, three rounds):
# bench/results/worker.json.
bench-worker: $(STAMP)
	$(PY) -m bench worker

# The followers figure alone (100 followers over two ledger replicas, 8 writers):
# bench/results/followers.json.
bench-followers: $(STAMP)
	$(PY) -m bench followers

# Figure 6 alone (listing runs and queued requests over 10,000 seeded runs):
# bench/results/listing.json.
bench-listing: $(STAMP)
	$(PY) -m bench listing

# pytest-benchmark micro-benchmarks (absolute times, no baseline) of single calls.
bench-micro: $(STAMP)
	$(PY) -m pytest -q tests/benchmarks -o python_files="bench_*.py" --benchmark-only -p no:cacheprovider

# Where each service process spends its CPU under admission load (py-spy, all threads).
profile: $(STAMP)
	$(PY) -m bench.profile

# DEMO_ARGS=--keep: the demo's own services keep serving its console links until Ctrl-C.
demo: $(STAMP)
	$(PY) -m services.demo $(DEMO_ARGS)

fixtures: $(STAMP)
	$(PYTHON) tools/fixtures/generate.py

fixtures-check: $(STAMP)
	$(PYTHON) tools/fixtures/generate.py --check

# The conformance vectors of the audit bundle format (tools/audit/vectors/README.md): real runs
# through the services in-process (fixed clock, fixed test key) and one-rule edits of them.
vectors: $(STAMP)
	$(PY) -m tools.audit.vectors.generate

vectors-check: $(STAMP)
	$(PY) -m tools.audit.vectors.generate --check

clean:
	rm -rf $(VENV) tools/node_modules var .pytest_cache .mypy_cache .ruff_cache
