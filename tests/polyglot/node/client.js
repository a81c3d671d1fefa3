#!/usr/bin/env node
// A Node.js gRPC client built only from the .proto files (no generated code): proof that a
// controller written in another language can talk to the ledger process.
//
//   node tests/polyglot/node/client.js <host:port> <run_id> [reader token]
//
// Loads protos/forge/continuity/v1/{ledger,policy}.proto with @grpc/proto-loader (includeDirs:
// protos/, plus this directory's proto/ for grpc.health.v1 and google.rpc.Status), then calls
// Health/Check, LedgerService/GetRun and PolicyService/GetPolicy with a bearer token,
// PolicyService/PutPolicy as a reader (must be PERMISSION_DENIED, ROLE_REQUIRED) and GetPolicy
// without a token (must be UNAUTHENTICATED, CREDENTIALS_MISSING). Refusals are decoded from the
// `grpc-status-details-bin` trailer (google.rpc.Status carrying a google.rpc.ErrorInfo).
// Prints one JSON document to stdout; the pytest test asserts its values.
//
// TLS as every Forge caller takes it: FORGE_TLS_CA (the CA bundle that verifies the server) turns
// it on; FORGE_TLS_CERT and FORGE_TLS_KEY add this client's certificate, which a server requiring
// client certificates (mutual TLS) asks for at the handshake. None set: plaintext.
//
// The npm packages come from tools/node_modules (`cd tools && npm install`).
'use strict';

const fs = require('fs');
const path = require('path');
const { createRequire } = require('module');

const REPO_ROOT = path.resolve(__dirname, '..', '..', '..');
const PROTO_ROOT = path.join(REPO_ROOT, 'protos');
const LOCAL_PROTO_ROOT = path.join(__dirname, 'proto');
const toolsRequire = createRequire(path.join(REPO_ROOT, 'tools', 'package.json'));
const grpc = toolsRequire('@grpc/grpc-js');
const protoLoader = toolsRequire('@grpc/proto-loader');
// protobufjs is proto-loader's own dependency: resolve it from there.
const protobuf = createRequire(toolsRequire.resolve('@grpc/proto-loader'))('protobufjs');

const CALL_SECONDS = 10;
const ERROR_INFO_TYPE_URL = 'type.googleapis.com/google.rpc.ErrorInfo';

function loadServices() {
  const definition = protoLoader.loadSync(
    [
      'forge/continuity/v1/ledger.proto',
      'forge/continuity/v1/policy.proto',
      'grpc/health/v1/health.proto',
    ],
    {
      keepCase: true,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
      includeDirs: [PROTO_ROOT, LOCAL_PROTO_ROOT],
    },
  );
  return grpc.loadPackageDefinition(definition);
}

function loadStatusTypes() {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => path.join(LOCAL_PROTO_ROOT, target);
  root.loadSync(['google/rpc/status.proto', 'google/rpc/error_details.proto'], {
    keepCase: true,
  });
  return {
    Status: root.lookupType('google.rpc.Status'),
    ErrorInfo: root.lookupType('google.rpc.ErrorInfo'),
  };
}

const { Status, ErrorInfo } = loadStatusTypes();

// The rich status of a failed call: code, message and the decoded details.
function describeError(error) {
  const described = {
    code: error.code,
    code_name: grpc.status[error.code],
    details: error.details,
  };
  const trailer = error.metadata ? error.metadata.get('grpc-status-details-bin') : [];
  if (trailer.length > 0) {
    const status = Status.decode(trailer[0]);
    described.status = {
      code: status.code,
      message: status.message,
      details: status.details.map((any) => {
        if (any.type_url !== ERROR_INFO_TYPE_URL) {
          return { type_url: any.type_url };
        }
        const info = ErrorInfo.toObject(ErrorInfo.decode(any.value), { defaults: true });
        return { type_url: any.type_url, ...info };
      }),
    };
  }
  return described;
}

function bearer(token) {
  const metadata = new grpc.Metadata();
  if (token) {
    metadata.set('authorization', `Bearer ${token}`);
  }
  return metadata;
}

// Resolves to {response} or {error}; never rejects, so every outcome lands in the report.
// The channel credentials FORGE_TLS_CA / FORGE_TLS_CERT / FORGE_TLS_KEY ask for.
function channelCredentials(env) {
  const { FORGE_TLS_CA: ca, FORGE_TLS_CERT: cert, FORGE_TLS_KEY: key } = env;
  if (!ca && !cert && !key) {
    return grpc.credentials.createInsecure();
  }
  if (Boolean(cert) !== Boolean(key)) {
    throw new Error('a client certificate needs its key: set both FORGE_TLS_CERT and FORGE_TLS_KEY');
  }
  const read = (file) => (file ? fs.readFileSync(file) : null);
  return grpc.credentials.createSsl(read(ca), read(key), read(cert));
}

function unary(client, method, request, token) {
  return new Promise((resolve) => {
    const deadline = new Date(Date.now() + CALL_SECONDS * 1000);
    client[method](request, bearer(token), { deadline }, (error, response) => {
      resolve(error ? { error: describeError(error) } : { response });
    });
  });
}

async function main() {
  const [target, runId, readerToken = 'reader-token'] = process.argv.slice(2);
  if (!target || !runId) {
    throw new Error('usage: client.js <host:port> <run_id> [reader token]');
  }
  const services = loadServices();
  const v1 = services.forge.continuity.v1;
  const credentials = channelCredentials(process.env);
  const health = new services.grpc.health.v1.Health(target, credentials);
  const ledger = new v1.LedgerService(target, credentials);
  const policy = new v1.PolicyService(target, credentials);

  const report = { health: {} };
  for (const service of ['', 'forge.continuity.v1.LedgerService', 'forge.continuity.v1.PolicyService']) {
    report.health[service] = await unary(health, 'Check', { service }, '');
  }
  report.get_run = await unary(ledger, 'GetRun', { run_id: runId }, readerToken);
  report.get_policy = await unary(policy, 'GetPolicy', {}, readerToken);
  report.put_policy_as_reader = await unary(
    policy,
    'PutPolicy',
    { expected_revision: 1, settings: { enabled: true, window_seconds: 60 } },
    readerToken,
  );
  report.get_policy_without_token = await unary(policy, 'GetPolicy', {}, '');

  for (const client of [health, ledger, policy]) {
    client.close();
  }
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
}

main().catch((error) => {
  process.stderr.write(`${error.stack || error}\n`);
  process.exit(1);
});
