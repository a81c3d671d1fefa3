"""Every environment variable the services read, with its meaning (the README documents them too;
tests/deploy checks the code, the image and the manifests against this list)."""

from __future__ import annotations

from collections.abc import Mapping

# Every environment variable the code reads, with its meaning (documented in the README too).
ENVIRONMENT: Mapping[str, str] = {
    "FORGE_HOST": "bind address of every service (default 127.0.0.1)",
    "FORGE_LEDGER_PORT": "ledger port (default 50051)",
    "FORGE_RECONSTRUCTION_PORT": "reconstruction port (default 50052)",
    "FORGE_CANDIDATE_PORT": "candidate port (default 50053)",
    "FORGE_ADMISSION_PORT": "admission port (default 50054)",
    "FORGE_LEDGER_TARGET": "host:port the candidate and admission services call the ledger at",
    "FORGE_RECONSTRUCTION_TARGET": (
        "host:port the candidate and admission services call reconstruction at"
    ),
    "FORGE_CANDIDATE_TARGET": "host:port the admission service calls the candidate service at",
    "FORGE_ADMISSION_TARGET": (
        "host:port of the admission service, for the Python client and operator CLI"
    ),
    "FORGE_TOKEN": "bearer token the Python client and operator CLI present",
    "FORGE_DATABASE_URL": "ledger database URL: sqlite:///path or postgresql+psycopg://...",
    "FORGE_PRINCIPALS_FILE": (
        "JSON file mapping token digests / mTLS subjects to identities and roles"
    ),
    "FORGE_SERVICE_TOKEN": "bearer token this service presents when it calls another service",
    "FORGE_SERVICE_TOKEN_FILE": (
        "file holding the bearer token this service presents (a mounted Secret); wins over "
        "FORGE_SERVICE_TOKEN"
    ),
    "FORGE_TLS_CA": (
        "PEM CA bundle that verifies the servers this process calls (a service's default: "
        "FORGE_TLS_CLIENT_CA, else the system's roots); for the CLI, the Python client, the "
        "reference worker and the Node.js client it turns TLS on"
    ),
    "FORGE_HEALTH_PORT": (
        "a plaintext port serving only the gRPC health check, for Kubernetes probes when the "
        "service port speaks TLS (default 0: none)"
    ),
    "FORGE_TLS_CERT": (
        "PEM certificate of this process: a service's (and the gateway's HTTPS) server "
        "certificate, with FORGE_TLS_KEY, also presented when it calls a service; the client "
        "certificate of the CLI, the Python client and the reference worker (mutual TLS)"
    ),
    "FORGE_TLS_KEY": "PEM private key of FORGE_TLS_CERT",
    "FORGE_TLS_CLIENT_CA": (
        "PEM CA bundle; when set, a service (or the gateway's HTTPS listener) requires client "
        "certificates it signed and refuses any other caller at the handshake (mutual TLS)"
    ),
    "FORGE_MAX_MESSAGE_BYTES": (
        "maximum response size, and request size of a method that uploads bytes (default 33554432)"
    ),
    "FORGE_MAX_REQUEST_BYTES": (
        "maximum request size of a method that uploads no bytes (default 1048576)"
    ),
    "FORGE_MAX_QUEUED_CALLS": (
        "calls a service queues beyond its busy threads before it answers RESOURCE_EXHAUSTED "
        "SERVER_BUSY (default 32)"
    ),
    "FORGE_RETRY_AFTER_MS": "the retry delay a SERVER_BUSY refusal asks for (default 250)",
    "FORGE_GRACE_SECONDS": "seconds in-flight calls get to drain on shutdown (default 10)",
    "FORGE_LOG_LEVEL": "log level (default INFO)",
    "FORGE_LOG_FORMAT": (
        "text (default; make run) or json (one object per line with trace, span, run and "
        "request ids; the deploy files)"
    ),
    "FORGE_DEVELOPMENT_MACHINE": (
        "1: this is a development machine, so a service bound beyond loopback may start with the "
        "well-known development tokens or signing key (compose sets it; refused otherwise)"
    ),
    "FORGE_METRICS_HOST": (
        "the address every /metrics endpoint listens on (default 127.0.0.1; compose and "
        "Kubernetes: 0.0.0.0, for the scraper)"
    ),
    "FORGE_LEDGER_METRICS_PORT": "ledger: Prometheus /metrics port (unset or 0: no endpoint)",
    "FORGE_RECONSTRUCTION_METRICS_PORT": (
        "reconstruction: Prometheus /metrics port (unset or 0: no endpoint)"
    ),
    "FORGE_CANDIDATE_METRICS_PORT": "candidate: Prometheus /metrics port (unset or 0: no endpoint)",
    "FORGE_ADMISSION_METRICS_PORT": "admission: Prometheus /metrics port (unset or 0: no endpoint)",
    "FORGE_GATEWAY_METRICS_PORT": "gateway: Prometheus /metrics port (unset or 0: no endpoint)",
    "FORGE_GATEWAY_ACCESS_LOG": "gateway: 1 logs one access line per HTTP request (default off)",
    "FORGE_LOG_FILE": (
        "a file every log line is also appended to (stdout always); make run sets "
        "var/continuity.log"
    ),
    "FORGE_QUALIFIED_SOURCE_PROFILES": (
        "development only (no FORGE_QUALIFIED_PROFILES_FILE): extra profile names, "
        "comma-separated, registered with the installed code's digest beside the release's own "
        "(ADR 0023)"
    ),
    "FORGE_QUALIFIED_PROFILES_FILE": (
        "JSON registry of qualified profiles, each with its profile digest (ADR 0023); the image "
        "sets the release's; unset: the development registry computed from the installed code"
    ),
    "FORGE_MAX_JOURNAL_FOLLOWERS": (
        "ledger: concurrent StreamJournal followers (default 8, at most half the server's thread "
        "pool)"
    ),
    "FORGE_MAX_FOLLOWERS_PER_CALLER": (
        "ledger: StreamJournal followers one caller (principal) may hold at once (default 4, at "
        "most FORGE_MAX_JOURNAL_FOLLOWERS)"
    ),
    "FORGE_MAX_JOURNAL_STREAMS": (
        "ledger: concurrent StreamJournal streams that do not follow and streamed "
        "ReadRunSnapshot calls (default 8, one caller at most half; at most half the server's "
        "thread pool)"
    ),
    "FORGE_MAX_STREAM_SECONDS": (
        "ledger: a StreamJournal ends UNAVAILABLE STREAM_TIME_LIMIT after this many seconds, "
        "naming the sequence to resume from (default 900)"
    ),
    "FORGE_SERVER_THREADS": "threads of each service's gRPC server pool (default 32)",
    "FORGE_RECONSTRUCTION_WORKERS": (
        "reconstruction: worker processes that run the pinned SDK on callers' bytes, one "
        "computation each at a time (default 2, at most 64)"
    ),
    "FORGE_RECONSTRUCTION_SECONDS": (
        "reconstruction: a computation is stopped after this many seconds of wall or CPU time, "
        "RESOURCE_EXHAUSTED RECONSTRUCTION_TIME_LIMIT (default 10)"
    ),
    "FORGE_RECONCILIATION_VERIFIER": (
        "ledger: the deployment's reconciliation verifier: local-process (workers on the "
        "ledger's host, in its pid namespace; make run's default), refusing, or "
        "package.module:attribute (unset: refusing, which proves nothing, so no RETRY_STAGE)"
    ),
    "FORGE_WORKER_TOKEN": "reference worker: the bearer token of its worker identity",
    "FORGE_WORKER_PROVIDER_URL": (
        "reference worker: base URL of the OpenAI-compatible provider (e.g. https://host/v1)"
    ),
    "FORGE_WORKER_PROVIDER_KEY": "reference worker: the provider API key",
    "FORGE_WORKER_MODEL": "reference worker: the model name (default: the checkpoint's)",
    "FORGE_WORKER_SOURCE_DIR": "reference worker: the checked-out source tree its tools use",
    "FORGE_WORKER_EVIDENCE_DIR": (
        "reference worker: evidence store <dir>/<run_id>/<kind>.json (default: the journal)"
    ),
    "FORGE_WORKER_GRANTED_COMMANDS": (
        "reference worker: JSON list of the argv lists it may run (default: none)"
    ),
    "FORGE_WORKER_COMMAND_TIMEOUT_SECONDS": "reference worker: seconds one command may run",
    "FORGE_WORKER_STOP_GRACE_SECONDS": (
        "reference worker: seconds the effect under way may finish after SIGTERM/SIGINT"
    ),
    "FORGE_WORKER_RUN_IDS": "reference worker: comma-separated runs to serve (or arguments)",
    "FORGE_DB_LEDGER_ROLE": (
        "ledger migrations on PostgreSQL: the database role the ledger service runs as, granted "
        "SELECT and INSERT and UPDATE only on the state tables (default forge_ledger; created "
        "NOLOGIN when absent)"
    ),
    "FORGE_EXPIRY_SWEEP_SECONDS": (
        "ledger: seconds between scheduled expiry sweeps, one replica at a time (default 5)"
    ),
    "FORGE_DB_POOL_SIZE": "ledger: PostgreSQL connections kept open per process (default 10)",
    "FORGE_DB_MAX_OVERFLOW": (
        "ledger: PostgreSQL connections opened beyond the pool under load (default 40)"
    ),
    "FORGE_DB_SERVER_PREPARES": (
        "ledger: on (default) lets psycopg prepare hot statements on the server and sets the "
        "timeouts once per server session; off behind a transaction-mode pooler (PgBouncer): "
        "no server prepares, timeouts set per transaction"
    ),
    "FORGE_DB_LOCK_TIMEOUT_MS": (
        "ledger: PostgreSQL lock_timeout of every transaction in ms (default 5000; 0 leaves the "
        "server's setting)"
    ),
    "FORGE_DB_STATEMENT_TIMEOUT_MS": (
        "ledger: PostgreSQL statement_timeout of every transaction in ms (default 30000; 0 "
        "leaves the server's setting)"
    ),
    "FORGE_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS": (
        "ledger: PostgreSQL idle_in_transaction_session_timeout of every transaction in ms "
        "(default 5000: the longest a frozen replica keeps a lock; 0 leaves the server's setting)"
    ),
    "FORGE_DB_IDLE_IN_STREAM_TIMEOUT_MS": (
        "ledger: idle_in_transaction_session_timeout in ms of a streamed snapshot's read "
        "transaction, which locks no row and waits for its reader (default 60000; 0 keeps the "
        "transactions' own)"
    ),
    "FORGE_DB_KEEPALIVE_IDLE_SECONDS": (
        "ledger: idle seconds before TCP keepalive probes on PostgreSQL connections (default 30; "
        "0 disables keepalives)"
    ),
    "FORGE_SIGNING_KEY_FILE": (
        "ledger: PEM (PKCS#8) Ed25519 private key that signs every journal head (ADR 0015); "
        "unset: heads are not signed (`make run` generates one under var/)"
    ),
    "FORGE_SIGNING_PUBLISHED_KEYS_FILE": (
        "ledger: PEM public keys of earlier signing keys, still published by GetSigningKeys "
        "after a key rotation (optional)"
    ),
    "FORGE_WORKER_SOURCE_REVISION": (
        "reference worker: the source revision it was deployed with (default: the run's)"
    ),
    "FORGE_WORKER_CONFIGURATION_DIGEST": (
        "reference worker: the configuration digest it was deployed with (default: the run's)"
    ),
    "FORGE_WORKER_SOURCE_PROFILE": (
        "reference worker: its source profile (default: the installed adapter's qualified one)"
    ),
    "FORGE_GRPC_KEEPALIVE_TIME_MS": (
        "idle ms before a gRPC client pings its connection (default 30000; not below the "
        "servers' FORGE_GRPC_MIN_PING_INTERVAL_MS)"
    ),
    "FORGE_GRPC_KEEPALIVE_TIMEOUT_MS": (
        "ms a gRPC keepalive ping may go unanswered before the connection is dropped "
        "(default 10000)"
    ),
    "FORGE_GRPC_MAX_CONNECTION_AGE_MS": (
        "ms after which a server asks a client to reconnect, so clients re-resolve and new "
        "replicas get traffic (default 300000)"
    ),
    "FORGE_GRPC_MAX_CONNECTION_AGE_GRACE_MS": (
        "ms calls in flight on an aged connection get before it is closed (default 30000)"
    ),
    "FORGE_GRPC_MIN_PING_INTERVAL_MS": (
        "the shortest interval between client pings a server accepts, in ms (default 10000)"
    ),
    "FORGE_GRPC_READ_RETRY_ATTEMPTS": (
        "attempts in all for an idempotent read that fails UNAVAILABLE or SERVER_BUSY (default "
        "3, 1..5; writes are never retried automatically)"
    ),
    "FORGE_GRPC_MAX_RECONNECT_BACKOFF_MS": (
        "longest wait, in ms, before a channel tries again to connect to an address that failed "
        "(default 5000)"
    ),
    "FORGE_GRPC_RETRY_TOKENS": (
        "a channel's retry throttling tokens: a failure costs one, a success earns 0.1, retries "
        "stop at half (default 10)"
    ),
    "FORGE_PRINCIPALS_RELOAD_SECONDS": (
        "how often, at most, a process checks the principals file for a change (default 2; a "
        "role change holds on every replica within this bound)"
    ),
    "OTEL_EXPORTER_OTLP_ENDPOINT": "OTLP/gRPC endpoint; spans are exported only when it is set",
    "OTEL_SERVICE_NAME": "overrides the service name reported in traces",
    "FORGE_GATEWAY_PORT": "HTTP/JSON gateway port (default 8080)",
    "FORGE_GATEWAY_MAX_BODY_BYTES": (
        "largest request body the HTTP gateway accepts, in bytes (default 1048576)"
    ),
}
