-- DEVELOPMENT ONLY (deploy/compose.yaml): the two database roles of ADR 0036, with well-known
-- passwords. The official image runs this once, as its superuser, when it creates the database.
--
-- forge_migrator owns the database, so its public schema (PostgreSQL 15 and later), and the
-- migrations run as it. forge_ledger is the ledger service: migration 0013 grants it what
-- services/ledger/table_access.py lists (no UPDATE or DELETE of the journal, signatures, blobs,
-- tickets or any other record). The migration creates forge_ledger NOLOGIN when it is absent;
-- here it exists first, with the login the ledger uses.
CREATE ROLE forge_migrator LOGIN PASSWORD 'forge-migrator-dev-password';
CREATE ROLE forge_ledger LOGIN PASSWORD 'forge-ledger-dev-password';
ALTER DATABASE forge OWNER TO forge_migrator;
