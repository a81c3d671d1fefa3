#!/usr/bin/env node
// Offline verifier for `forge.continuity.audit-bundle/1`, written from docs/formats.md
// ("Audit bundle", rules N1..N21) alone, as a second implementation of forge-continuity-verify.
// Node.js >= 20, standard library only.
//
//   node tools/audit/js/verify.mjs [--json] [--trusted-key FILE]... [--trust-bundle-keys]
//        [--known-heads FILE] [--require-blobs] [--allow-unsigned-head] BUNDLE
//
// Exit status (N20): 0 verified, 1 broken, 2 usage error.

import crypto from 'node:crypto';
import fs from 'node:fs';
import { parseArgs } from 'node:util';

// ---------------------------------------------------------------- constants (Primitives, layout)

const MAX_LINE = 25165824; // 24 MiB, LF not counted
const MAX_DEPTH = 128; // the outermost array or object is level 1
const MAX_INT = 9007199254740991; // 2^53 - 1
const GENESIS = 'sha256:' + '0'.repeat(64);
const BUNDLE_FORMAT = 'forge.continuity.audit-bundle/1';
const KEYS_FORMAT = 'forge.continuity.signing-keys/1';
const HEAD_V1 = 'forge.continuity.signed-head/1';
const HEAD_V2 = 'forge.continuity.signed-head/2';
const SPKI_ED25519_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

// JS `$` without the m flag matches only at the very end: no digest followed by a LF passes.
const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;
// `\d` in a JS regexp is ASCII 0-9 only.
const TIMESTAMP_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

// Section of each record type (layout table); entries and signed heads share section 4.
const SECTION = {
  manifest: 1, run: 2, signing_keys: 3, entry: 4, signed_head: 4, policy: 5,
  admission: 6, admission_absent: 6, blob: 7, blob_absent: 7, trailer: 8,
};
const SECTION_NAME = { 1: 'manifest', 2: 'run', 3: 'signing_keys', 8: 'trailer' };
const ONE_RECORD = new Set([1, 2, 3, 8]);

const RUN_RECORD_MEMBERS = [
  'run_id', 'task_id', 'attempt_id', 'source_revision', 'configuration_digest',
  'provider_timeout_seconds', 'active_deadline', 'command_limit', 'time_budget_protocol',
  'source_profile',
];
const COUNT_MEMBERS = ['entries', 'signed_heads', 'policies', 'admissions', 'blobs', 'blobs_absent'];
const BLOB_MEMBERS = new Set([
  'checkpoint_digest', 'response_digest', 'result_digest', 'derived_checkpoint_digest',
  'source_checkpoint_digest', 'consumed_response_digest', 'replaces_checkpoint_digest',
  'source_validator_report_digest', 'executable_probe_report_digest', 'configuration_digest',
]);

// ---------------------------------------------------------------- strict JSON (Primitives, N1, N5)

/** A JSON number written with a fraction or an exponent: never an integer (N5). */
class JFloat {
  constructor(value) { this.value = value; }
}

class JsonError extends Error {}

const isInt = (v) => typeof v === 'number'; // integers are plain numbers, other numbers JFloat
const isStr = (v) => typeof v === 'string';
const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof JFloat);
const isDigest = (v) => isStr(v) && DIGEST_RE.test(v);
const isTimestamp = (v) => isStr(v) && TIMESTAMP_RE.test(v);
const has = (o, k) => Object.prototype.hasOwnProperty.call(o, k);

/**
 * Parse one JSON text strictly: RFC 8259 syntax only, no repeated member name, no lone surrogate
 * escape, integer literals within +-(2^53-1) (measured by their digits before conversion, so a
 * 5,000-digit literal costs nothing), nesting at most 128. Objects have a null prototype so any
 * member name ("__proto__" included) is an ordinary key.
 */
function parseStrict(text) {
  let i = 0;
  const n = text.length;
  const fail = (why) => { throw new JsonError(`${why} at offset ${i}`); };
  const ws = () => {
    for (let c = text.charCodeAt(i); c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d; c = text.charCodeAt(++i));
  };
  const hex4 = () => {
    const h = text.slice(i, i + 4);
    if (!/^[0-9a-fA-F]{4}$/.test(h)) fail('bad \\u escape');
    i += 4;
    return parseInt(h, 16);
  };
  function string() {
    i++; // opening quote
    let out = '';
    let start = i;
    for (;;) {
      if (i >= n) fail('unterminated string');
      const c = text.charCodeAt(i);
      if (c === 0x22) { out += text.slice(start, i); i++; return out; }
      if (c < 0x20) fail('control character in string');
      if (c >= 0xd800 && c <= 0xdfff) { // raw surrogates: only as a well-formed pair
        const d = text.charCodeAt(i + 1);
        if (c > 0xdbff || !(d >= 0xdc00 && d <= 0xdfff)) fail('lone surrogate');
        i += 2;
        continue;
      }
      if (c !== 0x5c) { i++; continue; }
      out += text.slice(start, i);
      const e = text[i + 1];
      i += 2;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          const u = hex4();
          if (u >= 0xdc00 && u <= 0xdfff) fail('lone surrogate escape');
          if (u >= 0xd800 && u <= 0xdbff) { // must be followed by an escaped low surrogate
            if (text[i] !== '\\' || text[i + 1] !== 'u') fail('lone surrogate escape');
            i += 2;
            const v = hex4();
            if (!(v >= 0xdc00 && v <= 0xdfff)) fail('lone surrogate escape');
            out += String.fromCharCode(u, v);
          } else {
            out += String.fromCharCode(u);
          }
          break;
        }
        default: i -= 1; fail('bad escape');
      }
      start = i;
    }
  }
  function number() {
    const s = i;
    if (text[i] === '-') i++;
    if (text[i] === '0') i++;
    else if (text[i] >= '1' && text[i] <= '9') while (text[i] >= '0' && text[i] <= '9') i++;
    else fail('bad number');
    let integer = true;
    if (text[i] === '.') {
      integer = false;
      i++;
      if (!(text[i] >= '0' && text[i] <= '9')) fail('bad fraction');
      while (text[i] >= '0' && text[i] <= '9') i++;
    }
    if (text[i] === 'e' || text[i] === 'E') {
      integer = false;
      i++;
      if (text[i] === '+' || text[i] === '-') i++;
      if (!(text[i] >= '0' && text[i] <= '9')) fail('bad exponent');
      while (text[i] >= '0' && text[i] <= '9') i++;
    }
    const lit = text.slice(s, i);
    if (!integer) return new JFloat(Number(lit));
    // 2^53-1 has 16 digits: a longer literal is out of range without converting it.
    const digits = lit.length - (lit[0] === '-' ? 1 : 0);
    const v = digits > 16 ? Infinity : Number(lit);
    if (!(Math.abs(v) <= MAX_INT)) fail('integer beyond +-(2^53-1)');
    return v === 0 ? 0 : v; // -0 is the integer 0
  }
  function value(depth) {
    ws();
    const c = text[i];
    if (c === '{' || c === '[') {
      if (depth + 1 > MAX_DEPTH) fail('nesting deeper than 128');
      return c === '{' ? object(depth + 1) : array(depth + 1);
    }
    if (c === '"') return string();
    if (c === '-' || (c >= '0' && c <= '9')) return number();
    for (const [word, v] of [['true', true], ['false', false], ['null', null]]) {
      if (text.startsWith(word, i)) { i += word.length; return v; }
    }
    return fail('unexpected character');
  }
  function object(depth) {
    i++;
    const o = Object.create(null);
    ws();
    if (text[i] === '}') { i++; return o; }
    for (;;) {
      ws();
      if (text[i] !== '"') fail('member name expected');
      const k = string();
      if (k in o) fail(`member name repeated: ${JSON.stringify(k)}`);
      ws();
      if (text[i++] !== ':') fail('":" expected');
      o[k] = value(depth);
      ws();
      const d = text[i++];
      if (d === '}') return o;
      if (d !== ',') fail('"," or "}" expected');
    }
  }
  function array(depth) {
    i++;
    const a = [];
    ws();
    if (text[i] === ']') { i++; return a; }
    for (;;) {
      a.push(value(depth));
      ws();
      const d = text[i++];
      if (d === ']') return a;
      if (d !== ',') fail('"," or "]" expected');
    }
  }
  const v = value(0);
  ws();
  if (i !== n) fail('text after the JSON value');
  return v;
}

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** A line's bytes as a strict JSON object, or null (N1: line_unreadable). */
function parseLine(bytes) {
  let text;
  try { text = UTF8.decode(bytes); } catch { return null; }
  try {
    const v = parseStrict(text);
    return isObj(v) ? v : null;
  } catch (e) {
    if (e instanceof JsonError || e instanceof RangeError) return null;
    throw e;
  }
}

// ---------------------------------------------------------------- canonical JSON (RFC 8785)

/** Canonical JSON text; throws JsonError for a number with no JCS form (infinite). */
function canon(v) {
  if (v === null) return 'null';
  if (v === true) return 'true';
  if (v === false) return 'false';
  if (typeof v === 'number') return String(v);
  // JSON.stringify escapes exactly as JCS: \" \\ \b \f \n \r \t, other controls as \u00xx.
  if (typeof v === 'string') return JSON.stringify(v);
  if (v instanceof JFloat) {
    if (!Number.isFinite(v.value)) throw new JsonError('number without a canonical form');
    return String(v.value); // ECMAScript shortest form, as JCS prescribes
  }
  if (Array.isArray(v)) return '[' + v.map(canon).join(',') + ']';
  // Default sort compares UTF-16 code units, as JCS requires.
  return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + canon(v[k])).join(',') + '}';
}

const sha256 = (buf) => 'sha256:' + crypto.createHash('sha256').update(buf).digest('hex');
const digestOf = (v) => sha256(Buffer.from(canon(v), 'utf8'));

/** JSON value equality (numbers by value whether written as integer or not). */
function jsonEqual(a, b) {
  const num = (x) => (x instanceof JFloat ? x.value : x);
  if ((typeof a === 'number' || a instanceof JFloat) && (typeof b === 'number' || b instanceof JFloat)) {
    return num(a) === num(b);
  }
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, k) => jsonEqual(x, b[k]));
  if (isObj(a)) {
    if (!isObj(b)) return false;
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => has(b, k) && jsonEqual(a[k], b[k]));
  }
  return a === b;
}

/** RFC 4648 base64 with padding, nothing outside its alphabet (N5) -> Buffer, or null. */
function b64decode(s) {
  if (s.length % 4 !== 0 || !/^[A-Za-z0-9+/]*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(s)) return null;
  return Buffer.from(s, 'base64');
}

// ---------------------------------------------------------------- members of a record (N4, N5)

const KIND = {
  string: [isStr, 'a string'],
  integer: [isInt, 'an integer'],
  object: [isObj, 'an object'],
  list: [Array.isArray, 'a list'],
};

class Invalid extends Error {} // a member missing or of the wrong type: record_invalid

/** The member `name` of `rec`, present and of `kind`; a non-object record has no members. */
function need(rec, name, kind, what = 'record') {
  if (!isObj(rec) || !has(rec, name)) throw new Invalid(`${what} has no member '${name}'`);
  const [ok, text] = KIND[kind];
  if (!ok(rec[name])) throw new Invalid(`${name} must be ${text}`);
  return rec[name];
}

function needDigest(rec, name, what) {
  const v = need(rec, name, 'string', what);
  if (!isDigest(v)) throw new Invalid(`${name} must be sha256:<64 hex>`);
  return v;
}

function needBase64(rec, name, what) {
  const v = b64decode(need(rec, name, 'string', what));
  if (v === null) throw new Invalid(`${name} is not base64`);
  return v;
}

// ---------------------------------------------------------------- keys (N7, N8, N9)

class KeyError extends Error {} // signing_key_invalid

/** One key of a signing-keys list -> {keyId, raw, window}; Invalid or KeyError (N7, N9). */
function readKey(k) {
  const algorithm = need(k, 'algorithm', 'string');
  const keyId = needDigest(k, 'key_id');
  const raw = needBase64(k, 'public_key');
  if (algorithm !== 'ed25519') throw new KeyError(`${keyId}: only ed25519 keys are known`);
  if (raw.length !== 32) throw new KeyError(`${keyId}: public_key is not 32 bytes`);
  if (sha256(raw) !== keyId) throw new KeyError(`${keyId} is not the digest of its public key`);
  const bound = (name) => { // absent means null (layout table); compared as text, so one form only (N9)
    const v = has(k, name) ? k[name] : null;
    if (v !== null && !isTimestamp(v)) throw new KeyError(`${keyId}: ${name} ${JSON.stringify(v)} is not YYYY-MM-DDTHH:MM:SS.ffffffZ`);
    return v;
  };
  return { keyId, raw, window: [bound('not_before'), bound('not_after')] };
}

/** A --trusted-key file (N8): a signing-keys file, PEM public key(s), or base64 of 32 raw bytes. */
function loadTrustedKeys(path) {
  const text = UTF8.decode(fs.readFileSync(path)).trim();
  if (text.startsWith('{')) {
    const doc = parseStrict(text);
    if (!isObj(doc) || doc.format !== KEYS_FORMAT) throw new KeyError(`not a ${KEYS_FORMAT} file`);
    return need(doc, 'keys', 'list').map(readKey);
  }
  if (text.startsWith('-----BEGIN')) {
    const pem = /-----BEGIN PUBLIC KEY-----[\s\S]*?-----END PUBLIC KEY-----/.exec(text); // the first block
    if (!pem) throw new KeyError('not a PEM PUBLIC KEY');
    const key = crypto.createPublicKey(pem[0]);
    if (key.asymmetricKeyType !== 'ed25519') throw new KeyError('the PEM key is not an Ed25519 key');
    const raw = key.export({ format: 'der', type: 'spki' }).subarray(SPKI_ED25519_PREFIX.length);
    return [{ keyId: sha256(raw), raw, window: [null, null] }];
  }
  const raw = b64decode(text);
  if (!raw || raw.length !== 32) throw new KeyError('neither a signing-keys file, a PEM public key nor base64 of 32 bytes');
  return [{ keyId: sha256(raw), raw, window: [null, null] }];
}

/** Add keys to a Map key_id -> {raw, windows}; a key listed twice keeps every window stated. */
function addKeys(map, keys) {
  for (const k of keys) {
    if (!map.has(k.keyId)) map.set(k.keyId, { raw: k.raw, windows: [] });
    map.get(k.keyId).windows.push(k.window);
  }
}

const insideWindow = (at, [nb, na]) => (nb === null || nb <= at) && (na === null || at <= na);

const keyObjects = new Map(); // raw key (hex) -> KeyObject
function verifies(raw, h) {
  try {
    const id = raw.toString('hex');
    if (!keyObjects.has(id)) {
      keyObjects.set(id, crypto.createPublicKey({ key: Buffer.concat([SPKI_ED25519_PREFIX, raw]), format: 'der', type: 'spki' }));
    }
    return crypto.verify(null, Buffer.from(canon(headStatement(h)), 'utf8'), keyObjects.get(id), h.sig);
  } catch {
    return false; // e.g. a signature that is not 64 bytes
  }
}

/** The statement a signature covers: /1 its first six members; /2 also previous (its three
 *  members only: others are ignored, N4) and unsigned_through. */
function headStatement(h) {
  const s = {
    format: h.v2 ? HEAD_V2 : HEAD_V1, run_id: h.run_id, sequence: h.sequence, head_hash: h.head_hash,
    signed_at: h.signed_at, key_id: h.key_id,
  };
  if (!h.v2) return s;
  const p = h.previous;
  s.previous = p === null ? null : { sequence: p.sequence, head_hash: p.head_hash, signature_digest: p.signature_digest };
  s.unsigned_through = h.unsigned_through;
  return s;
}

/** Members of a signed_head beyond sequence, run_id and head_hash (N5, N9); sets h.v2, h.sig. */
function readSignedHead(h) {
  need(h, 'key_id', 'string', 'signed_head');
  if (!isTimestamp(need(h, 'signed_at', 'string', 'signed_head'))) throw new Invalid('signed_at must be YYYY-MM-DDTHH:MM:SS.ffffffZ');
  h.sig = needBase64(h, 'signature', 'signed_head'); // its length is the signature's business
  const format = has(h, 'format') ? h.format : HEAD_V1; // a record without format is /1
  if (format !== HEAD_V1 && format !== HEAD_V2) throw new Invalid(`unknown signed head format ${JSON.stringify(format)}`);
  h.v2 = format === HEAD_V2;
  if (h.v2) {
    const p = has(h, 'previous') ? h.previous : undefined;
    if (p !== null && !isObj(p)) throw new Invalid('previous must be an object or null');
    if (p !== null) {
      need(p, 'sequence', 'integer');
      needDigest(p, 'head_hash');
      needDigest(p, 'signature_digest');
    }
    need(h, 'unsigned_through', 'integer', 'signed_head');
  }
  return h;
}

// ---------------------------------------------------------------- reading lines (N1, 24 MiB bound)

class LineReader {
  constructor(fd) {
    Object.assign(this, { fd, buf: Buffer.alloc(1 << 20), start: 0, end: 0, eof: false });
  }

  fill() {
    if (this.start < this.end || this.eof) return;
    this.start = 0;
    this.end = fs.readSync(this.fd, this.buf, 0, this.buf.length, null);
    if (this.end === 0) this.eof = true;
  }

  /** True when at least one more byte remains. */
  more() { this.fill(); return this.start < this.end; }

  /** The next line {bytes, tooLong}: past the bound, bytes holds the first MAX_LINE bytes and the
   *  rest is left unread; null at the end of the file. */
  next() {
    const parts = [];
    let len = 0;
    for (;;) {
      this.fill();
      if (this.start >= this.end) break;
      const chunk = this.buf.subarray(this.start, this.end);
      const lf = chunk.indexOf(0x0a);
      const take = lf === -1 ? chunk.length : lf;
      if (len + take > MAX_LINE) {
        parts.push(Buffer.from(chunk.subarray(0, MAX_LINE - len)));
        return { bytes: Buffer.concat(parts, MAX_LINE), tooLong: true };
      }
      parts.push(Buffer.from(chunk.subarray(0, take)));
      len += take;
      this.start += lf === -1 ? take : take + 1;
      if (lf !== -1) return { bytes: Buffer.concat(parts, len), tooLong: false };
    }
    return parts.length ? { bytes: Buffer.concat(parts, len), tooLong: false } : null;
  }
}

/**
 * The record type a line that cannot be read claims to be, so that its break is named at the
 * sequence such a record is about (N2a): the `<t>` of the first `"type":"<t>"` within the line's
 * first 64 bytes when `<t>` is a known type, else the type of the first of these byte strings
 * the line contains, in this order, else none.
 */
const TYPE_RE = /"type":"([a-z_]{1,20})"/;
const DISTINCTIVE = [
  ['"payload_json":', 'entry'], ['"signature":', 'signed_head'], ['"settings":', 'policy'],
  ['"settlement_sequence":', 'admission'], ['"content":', 'blob'], ['"counts":', 'trailer'],
  ['"keys":', 'signing_keys'], ['"record":', 'run'], ['"format":', 'manifest'],
  ['"request_id":', 'admission_absent'], ['"digest":', 'blob_absent'],
];
function sniffType(bytes) {
  const m = TYPE_RE.exec(bytes.subarray(0, 64).toString('latin1'));
  if (m && has(SECTION, m[1])) return m[1];
  const text = bytes.toString('latin1');
  const hit = DISTINCTIVE.find(([member]) => text.includes(member));
  return hit ? hit[1] : null;
}

// ---------------------------------------------------------------- the verifier

class Break extends Error {
  constructor(problem, sequence, detail, line) {
    super(detail);
    Object.assign(this, { problem, sequence, detail, line });
  }
}

class UsageError extends Error {}

class Verifier {
  constructor(opts) {
    this.opts = opts;
    this.pinned = new Map(); // key_id -> {raw, windows}: keys given with --trusted-key
    for (const file of opts.trustedKeys) {
      try {
        addKeys(this.pinned, loadTrustedKeys(file));
      } catch (e) {
        throw new UsageError(`trusted key ${file}: ${e.message}`);
      }
    }
    if (opts.knownHeads !== undefined) {
      for (const _ of Verifier.headLines(opts.knownHeads, (why) => { throw new UsageError(`known heads ${opts.knownHeads}: ${why}`); }));
    }
    this.published = new Map(); // the bundle's own keys
    this.line = 0;
    this.section = 0; // section of the last record read (layout table)
    this.hash = crypto.createHash('sha256'); // every byte before the trailer line
    this.counts = { entries: 0, signed_heads: 0, policies: 0, admissions: 0, blobs: 0, blobs_absent: 0 };
    this.last = null; // the last entry: {seq, hash, runId, kind, requestId, signed}
    this.prevHash = GENESIS;
    this.uncovered = []; // ranges [from, to] of entries left unsigned before the first /2 (N13)
    this.unsignedThrough = null; // stated by the first /2 signature
    this.unsignedAccepted = 0;
    this.prevHead = null; // the signed head before: {sequence, head_hash, sigDigest}
    this.prevV2 = null; // the /2 signed head before (unsigned_through and signed_at compare with it)
    this.headKeyId = null;
    this.charged = new Set();
    this.cited = new Map(); // policy revision -> first citing sequence (N17)
    this.citedSorted = null; // ascending, once the journal is over
    this.blobRefs = new Map(); // digest -> first referencing sequence, in reference order (N18)
    this.blobSeq = null; // [{digest, seq}], once the journal is over
    this.settlements = []; // the tickets the bundle recomputes, in sequence order
    this.policyDigest = new Map();
    this.blobsAbsent = [];
    this.witnessed = null; // Map sequence -> hash, with --known-heads
  }

  fail(problem, sequence, detail, line = this.line) { throw new Break(problem, sequence, detail, line); }

  /** Run `f`; a member missing or mistyped in it is record_invalid, named at `seq` (N5). */
  members(seq, f) {
    try {
      return f();
    } catch (e) {
      if (e instanceof Invalid) this.fail('record_invalid', seq, e.message);
      throw e;
    }
  }

  /** Verify the file at `path`; returns the report or throws Break. */
  run(path) {
    let fd;
    try { fd = fs.openSync(path, 'r'); } catch (e) { throw new UsageError(`cannot open ${path}: ${e.message}`); }
    try {
      const reader = new LineReader(fd);
      for (;;) {
        if (this.section === 8) { // N3: nothing follows the trailer
          if (reader.more()) this.fail('trailing_data', 0, 'a line follows the trailer', this.line + 1);
          return this.report();
        }
        const l = reader.next();
        if (l === null) this.fail('trailer_missing', 0, 'the file ends without a trailer'); // N2
        this.line++;
        if (l.tooLong) this.fail('line_too_long', this.about(sniffType(l.bytes)), `line longer than ${MAX_LINE} bytes`);
        this.record(l.bytes);
      }
    } finally {
      fs.closeSync(fd);
    }
  }

  /** The sequence a record of `type` at this point is about (what a break in it is named at). */
  about(type) {
    const nth = (list, n) => (n < list.length ? list[n].seq : 0);
    switch (type) {
      case 'entry': return this.last ? this.last.seq + 1 : 1;
      case 'signed_head': return this.last ? this.last.seq : 0;
      case 'policy': return nth(this.citedList(), this.counts.policies);
      case 'admission': case 'admission_absent': return nth(this.settlements, this.counts.admissions);
      case 'blob': case 'blob_absent': return nth(this.blobList(), this.counts.blobs + this.counts.blobs_absent);
      default: return 0;
    }
  }

  citedList() {
    return this.citedSorted || [...this.cited].map(([rev, seq]) => ({ rev, seq })).sort((a, b) => a.rev - b.rev);
  }

  blobList() { return this.blobSeq || [...this.blobRefs].map(([digest, seq]) => ({ digest, seq })); }

  record(bytes) {
    const rec = parseLine(bytes);
    if (rec === null) this.fail('line_unreadable', this.about(sniffType(bytes)), 'not a strict JSON object (UTF-8, no repeated member, integers within 2^53-1, nesting <= 128)');
    const type = rec.type;
    if (!isStr(type) || !has(SECTION, type)) this.fail('record_invalid', this.about(sniffType(bytes)), `unknown record type ${JSON.stringify(type)}`);
    const sec = SECTION[type];
    if (sec < this.section || (sec === this.section && ONE_RECORD.has(sec))) { // N3
      this.fail('out_of_order', this.about(type), `a ${type} record after a ${Object.keys(SECTION).find((k) => SECTION[k] === this.section)} record`);
    }
    for (let s = this.section + 1; s < sec; s++) {
      // N2: a break about the manifest, run or keys record is named at 0, whatever line finds it
      if (ONE_RECORD.has(s)) this.fail('record_missing', 0, `no ${SECTION_NAME[s]} record before this ${type} record`);
    }
    // Leaving a section: its end checks, found at the first record after it (N2).
    if (this.section <= 4 && sec > 4) this.endJournal();
    if (this.section <= 5 && sec > 5) this.endPolicies();
    if (this.section <= 6 && sec > 6) this.endAdmissions();
    if (this.section <= 7 && sec > 7) this.endBlobs();
    this.section = sec;
    this[`on_${type}`](rec);
    if (type !== 'trailer') this.hash.update(bytes).update('\n');
  }

  // ------------------------------------------------ manifest, run, keys (named at sequence 0)

  on_manifest(m) {
    const format = this.members(0, () => need(m, 'format', 'string', 'manifest'));
    if (format !== BUNDLE_FORMAT) this.fail('format_unknown', 0, `format is not ${BUNDLE_FORMAT}`);
    this.members(0, () => {
      this.runId = need(m, 'run_id', 'string', 'manifest');
      const h = need(m, 'head', 'object', 'manifest');
      if (!isInt(h.sequence) || h.sequence < 0) throw new Invalid('head.sequence must be a non-negative integer'); // N6
      if (!isStr(h.hash)) throw new Invalid('head.hash must be a string');
      this.head = { seq: h.sequence, hash: h.hash };
    });
    if (this.opts.knownHeads !== undefined) this.loadKnownHeads(this.opts.knownHeads);
  }

  on_run(r) {
    const [rec, runDigest] = this.members(0, () => {
      const rec = need(r, 'record', 'object', 'run');
      const keys = Object.keys(rec);
      if (keys.length !== RUN_RECORD_MEMBERS.length || !RUN_RECORD_MEMBERS.every((k) => has(rec, k))) { // N4: it is hashed
        throw new Invalid(`run record members must be ${RUN_RECORD_MEMBERS.join(', ')}`);
      }
      return [rec, needDigest(r, 'run_digest', 'run')];
    });
    this.runDigest = digestOf(rec);
    if (this.runDigest !== runDigest) this.fail('run_digest_mismatch', 0, 'the run record does not hash to its recorded run_digest');
    if (rec.run_id !== this.runId) this.fail('run_mismatch', 0, 'the run record is not the manifest\'s run');
    if (!isInt(rec.command_limit)) this.fail('record_invalid', 0, 'command_limit must be an integer');
    this.commandLimit = rec.command_limit;
  }

  on_signing_keys(r) {
    const keys = this.members(0, () => need(r, 'keys', 'list', 'signing_keys'));
    for (const k of keys) {
      try {
        addKeys(this.published, [this.members(0, () => readKey(k))]);
      } catch (e) {
        if (e instanceof KeyError) this.fail('signing_key_invalid', 0, e.message);
        throw e;
      }
    }
  }

  // ------------------------------------------------ the journal

  on_entry(e) {
    const expected = this.last ? this.last.seq + 1 : 1;
    const field = (name) => this.members(expected, () => need(e, name, name === 'sequence' ? 'integer' : 'string', 'entry'));
    // N13a: the entry's own checks, in this order, each member read as it is needed.
    const found = field('sequence');
    if (found !== expected) this.fail('sequence_gap', expected, `found ${found}`); // N10
    const seq = expected;
    if (field('run_id') !== this.runId) this.fail('run_mismatch', seq, 'the entry is not the manifest\'s run');
    if (field('prev_hash') !== this.prevHash) this.fail('link_mismatch', seq, 'prev_hash is not the previous entry\'s hash');
    const text = field('payload_json');
    let payload;
    try {
      payload = parseStrict(text);
      if (canon(payload) !== text) throw new JsonError('payload_json is not the canonical text of its value');
    } catch (err) {
      if (!(err instanceof JsonError || err instanceof RangeError)) throw err;
      this.fail('payload_not_canonical', seq, err.message);
    }
    const envelope = {
      run_id: e.run_id, sequence: seq, kind: field('kind'), payload, prev_hash: e.prev_hash,
      actor: field('actor'), recorded_at: field('recorded_at'),
    };
    const hash = field('hash');
    if (digestOf(envelope) !== hash) this.fail('hash_mismatch', seq, 'the envelope does not hash to its recorded hash');

    const obj = isObj(payload) ? payload : Object.create(null);
    const prev = this.last;
    // N14: a settlement's claim names the same request_id (compared as JSON values; both absent is equal).
    const claimsPrev = prev !== null && prev.kind === 'migration_settlement' && e.kind === 'ownership_claim'
      && jsonEqual(prev.requestId, obj.request_id);
    // head_unsigned of the entry before (N13). A settlement is never named here: whatever entry
    // follows it covers it (N13), and not being its claim is settlement_without_claim below (N14).
    if (prev && !prev.signed && prev.kind !== 'migration_settlement') this.unsigned(prev.seq);
    if (this.witnessed && this.witnessed.has(seq) && this.witnessed.get(seq) !== hash) {
      this.fail('fork', seq, `a monitor witnessed ${this.witnessed.get(seq)} at ${seq}`);
    }
    if (prev && prev.kind === 'migration_settlement' && !claimsPrev) {
      this.fail('settlement_without_claim', prev.seq, 'the settlement is not followed by its ownership_claim');
    }
    if (claimsPrev) this.settlements[this.settlements.length - 1].execution_request_id = obj.execution_request_id;
    if (e.kind === 'command_executed') this.charge(obj.command_id, seq); // N16: no object, no command_id
    // What the entry cites: a policy revision (N17) and blobs (N18).
    if (isInt(obj.policy_revision) && !this.cited.has(obj.policy_revision)) this.cited.set(obj.policy_revision, seq);
    this.collectBlobs(payload, seq);
    if (e.kind === 'migration_settlement') {
      this.settlements.push({
        seq, request_id: obj.request_id, operator_identity: e.actor, settlement_sequence: seq, claim_sequence: seq + 1,
        candidate_digest: obj.candidate_digest, policy_revision: obj.policy_revision, version: obj.version,
        derived_checkpoint_digest: obj.derived_checkpoint_digest, journal_digest: e.prev_hash,
      });
    }
    this.last = { seq, hash, runId: e.run_id, kind: e.kind, requestId: obj.request_id, signed: false };
    this.prevHash = hash;
    this.counts.entries++;
  }

  /** N16: the command ledger at a command_executed receipt. */
  charge(id, seq) {
    if (!isStr(id)) this.fail('command_receipt_invalid', seq, 'command_executed has no string command_id');
    if (this.charged.has(id)) this.fail('command_charged_twice', seq, `command ${JSON.stringify(id)} was charged before`);
    this.charged.add(id);
    if (this.charged.size > this.commandLimit) {
      this.fail('command_limit_exceeded', seq, `${this.charged.size} commands charged, command_limit ${this.commandLimit}`);
    }
  }

  /** N18: blob references, walking the payload in canonical member order, depth first. */
  collectBlobs(v, seq) {
    const ref = (d) => { if (isDigest(d) && !this.blobRefs.has(d)) this.blobRefs.set(d, seq); };
    if (Array.isArray(v)) {
      for (const item of v) this.collectBlobs(item, seq); // an item is not a member
    } else if (isObj(v)) {
      for (const k of Object.keys(v).sort()) {
        const x = v[k];
        if (k === 'retained_results' && isObj(x)) for (const kk of Object.keys(x).sort()) ref(x[kk]);
        else if (BLOB_MEMBERS.has(k) && isDigest(x)) ref(x);
        else this.collectBlobs(x, seq); // a blob member of another value is walked too
      }
    }
  }

  /** An entry no signature covers (N13): remembered before the first /2, judged after it. */
  unsigned(seq) {
    if (this.unsignedThrough === null) {
      const r = this.uncovered[this.uncovered.length - 1];
      if (r && r[1] === seq - 1) r[1] = seq;
      else this.uncovered.push([seq, seq]);
    } else if (seq > this.unsignedThrough) {
      if (!this.opts.allowUnsignedHead) this.fail('head_unsigned', seq, 'no trusted signed head covers this entry');
      this.unsignedAccepted++;
    }
  }

  /** The first /2 signature (or the end of the journal, with 0) states unsigned_through. */
  settleUncovered(through) {
    this.unsignedThrough = through;
    for (const [from, to] of this.uncovered) {
      if (to <= through) continue;
      const first = Math.max(from, through + 1);
      if (!this.opts.allowUnsignedHead) this.fail('head_unsigned', first, `no trusted signed head covers this entry (unsigned_through ${through})`);
      this.unsignedAccepted += to - first + 1;
    }
    this.uncovered = [];
  }

  on_signed_head(h) {
    const last = this.last;
    const at = last ? last.seq : 0;
    // N12 (sequence, run_id and head_hash each read as it is needed), then the other members.
    const seq = this.members(at, () => need(h, 'sequence', 'integer', 'signed_head'));
    if (!last || seq !== last.seq || last.signed) this.fail('signature_misplaced', at, 'a signed head follows its own entry, once');
    if (this.members(at, () => need(h, 'run_id', 'string', 'signed_head')) !== last.runId
      || this.members(at, () => need(h, 'head_hash', 'string', 'signed_head')) !== last.hash) {
      this.fail('signed_head_mismatch', at, 'the signed head is not this entry\'s hash: history changed');
    }
    this.members(at, () => readSignedHead(h));
    this.vouch(h, at);
    if (h.v2) { // the chain of signatures
      const p = this.prevHead;
      const named = h.previous;
      if (p === null ? named !== null
        : named === null || named.sequence !== p.sequence || named.head_hash !== p.head_hash || named.signature_digest !== p.sigDigest) {
        this.fail('signature_chain_broken', at, 'previous does not name the signed head before this one');
      }
      // unsigned_through and signed_at are compared with the previous /2 signature, whatever /1
      // signatures lie between ("Signed head").
      const q = this.prevV2;
      if (q && h.unsigned_through !== q.unsignedThrough) {
        this.fail('signature_chain_broken', at, `unsigned_through ${h.unsigned_through}, before ${q.unsignedThrough}`);
      }
      if (q && h.signed_at < q.signedAt) this.fail('signature_chain_broken', at, 'signed_at decreases');
      if (this.unsignedThrough === null) this.settleUncovered(h.unsigned_through);
    }
    this.prevHead = { sequence: h.sequence, head_hash: h.head_hash, sigDigest: sha256(h.sig), v2: h.v2, signedAt: h.signed_at, unsignedThrough: h.unsigned_through };
    if (h.v2) this.prevV2 = this.prevHead;
    this.headKeyId = h.key_id;
    last.signed = true;
    this.counts.signed_heads++;
  }

  /** A signed head's key: known, trusted, inside every window stated for it, and its signature. */
  vouch(h, at) {
    const pub = this.published.get(h.key_id);
    const pin = this.pinned.get(h.key_id);
    if (!pub && !pin) this.fail('signing_key_unknown', at, `${h.key_id} is not published`);
    if (!pin && (this.pinned.size || !this.opts.trustBundleKeys)) this.fail('signing_key_untrusted', at, `${h.key_id} is not a trusted key`);
    for (const w of [...(pub ? pub.windows : []), ...(pin ? pin.windows : [])]) {
      if (!insideWindow(h.signed_at, w)) this.fail('signing_key_outside_window', at, `${h.key_id} does not vouch for ${h.signed_at}`);
    }
    if (!verifies((pin || pub).raw, h)) this.fail('signature_invalid', at, 'the signature does not verify');
  }

  /** End of the journal, in N15's order. */
  endJournal() {
    const lastSeq = this.last ? this.last.seq : 0;
    if (lastSeq !== this.head.seq || this.prevHash !== this.head.hash) {
      this.fail('head_mismatch', Math.max(lastSeq, this.head.seq), `the journal ends at ${lastSeq}, the manifest's head is ${this.head.seq}`);
    }
    if (this.last && this.last.kind === 'migration_settlement') {
      this.fail('settlement_without_claim', lastSeq, 'the journal ends with a settlement');
    }
    if (this.last && !this.last.signed) this.unsigned(lastSeq);
    if (this.unsignedThrough === null) this.settleUncovered(0);
    const newest = this.witnessed && this.witnessed.size ? Math.max(...this.witnessed.keys()) : 0;
    if (newest > lastSeq) this.fail('rollback', newest, `the journal ends at ${lastSeq}, a monitor witnessed ${newest}`);
    this.citedSorted = this.citedList();
    this.blobSeq = this.blobList();
    this.blobRefs = null;
  }

  // ------------------------------------------------ policies, admissions, blobs

  on_policy(p) {
    const want = this.citedSorted[this.counts.policies];
    if (!want) this.fail('policy_unexpected', 0, 'a policy record beyond the cited revisions');
    const seq = want.seq;
    const [revision, settings, digest] = this.members(seq, () => [
      need(p, 'revision', 'integer', 'policy'), need(p, 'settings', 'object', 'policy'), needDigest(p, 'digest', 'policy'),
    ]);
    if (has(settings, 'revision')) this.fail('record_invalid', seq, 'settings must not hold revision');
    if (revision !== want.rev) this.fail('policy_missing', seq, `revision ${want.rev} is cited, not ${revision}`);
    const computed = digestOf({ revision, ...settings });
    if (computed !== digest) this.fail('policy_digest_mismatch', seq, `revision ${revision} does not hash`);
    this.policyDigest.set(revision, computed);
    this.counts.policies++;
  }

  endPolicies() {
    const want = this.citedSorted[this.counts.policies];
    if (want) this.fail('policy_missing', want.seq, `revision ${want.rev} is cited and has no policy record`);
  }

  on_admission(a) {
    const t = this.settlements[this.counts.admissions];
    if (!t) this.fail('admission_unexpected', 0, 'an admission record beyond the settlements');
    const got = this.members(t.seq, () => {
      const g = {};
      for (const [k, kind] of ADMISSION_MEMBERS) g[k] = need(a, k, kind, 'admission');
      for (const k of ADMISSION_DIGESTS) g[k] = need(a.digests, k, 'string', 'admission'); // N19: required
      return g;
    });
    const want = { ...t, run_digest: this.runDigest, policy_digest: this.policyDigest.get(t.policy_revision) };
    for (const k of [...ADMISSION_MEMBERS.map(([k]) => k), ...ADMISSION_DIGESTS]) {
      if (k !== 'digests' && !jsonEqual(got[k], want[k])) this.fail('admission_mismatch', t.seq, `the ticket's ${k} is not what the bundle recomputes`);
    }
    this.counts.admissions++;
  }

  on_admission_absent() {
    const t = this.settlements[this.counts.admissions];
    if (!t) this.fail('admission_unexpected', 0, 'an admission_absent record beyond the settlements');
    this.fail('admission_missing', t.seq, 'the ledger has no ticket'); // N19
  }

  endAdmissions() {
    const t = this.settlements[this.counts.admissions];
    if (t) this.fail('admission_missing', t.seq, 'the settlement has no admission record');
  }

  blobRecord(b, absent) {
    const n = this.counts.blobs + this.counts.blobs_absent;
    const want = this.blobSeq[n];
    if (!want) this.fail('blob_unexpected', 0, 'a blob record beyond the referenced digests');
    const seq = want.seq;
    const [digest, content] = this.members(seq, () => [
      need(b, 'digest', 'string', absent ? 'blob_absent' : 'blob'), absent ? null : needBase64(b, 'content', 'blob'),
    ]);
    if (digest !== want.digest) this.fail('blob_omitted', seq, `${want.digest} is referenced and not in the bundle`);
    if (absent) {
      this.counts.blobs_absent++;
      this.blobsAbsent.push(digest);
      if (this.opts.requireBlobs) this.fail('blob_missing', seq, `the ledger stores no blob ${digest}`);
    } else {
      if (sha256(content) !== digest) this.fail('blob_mismatch', seq, `the content does not hash to ${digest}`);
      this.counts.blobs++;
    }
  }

  on_blob(b) { this.blobRecord(b, false); }

  on_blob_absent(b) { this.blobRecord(b, true); }

  endBlobs() {
    const want = this.blobSeq[this.counts.blobs + this.counts.blobs_absent];
    if (want) this.fail('blob_omitted', want.seq, `${want.digest} is referenced and not in the bundle`);
  }

  on_trailer(t) {
    const [counts, bundleDigest] = this.members(0, () => [need(t, 'counts', 'object', 'trailer'), need(t, 'bundle_digest', 'string', 'trailer')]);
    // N4: exactly the six counts; a count is compared as a JSON number.
    const keys = Object.keys(counts);
    if (keys.length !== COUNT_MEMBERS.length || !COUNT_MEMBERS.every((k) => has(counts, k) && jsonEqual(counts[k], this.counts[k]))) {
      this.fail('trailer_mismatch', 0, `counts ${canonOrText(counts)} != ${canon(this.counts)}`);
    }
    if ('sha256:' + this.hash.digest('hex') !== bundleDigest) this.fail('trailer_mismatch', 0, 'the lines before the trailer do not hash');
  }

  // ------------------------------------------------ witnessed heads

  /** Each line of a heads file as a record (`bad` on a line that is no signed_head record). */
  static *headLines(path, bad) {
    let fd;
    try { fd = fs.openSync(path, 'r'); } catch (e) { bad(e.message); }
    try {
      const reader = new LineReader(fd);
      for (let l = reader.next(), n = 1; l !== null; l = reader.next(), n++) {
        const h = l.tooLong ? null : parseLine(l.bytes);
        if (h === null || h.type !== 'signed_head') bad(`line ${n} is not a signed_head record`);
        yield [n, h];
      }
    } finally {
      fs.closeSync(fd);
    }
  }

  /** --known-heads, once the run is known: the heads of this run a monitor witnessed, each of
   *  them checked (a bad file is a usage error). Heads of other runs are skipped unread. Before
   *  any of the bundle is read, the constructor has checked every line is a signed_head record. */
  loadKnownHeads(path) {
    const bad = (why) => { throw new UsageError(`known heads ${path}: ${why}`); };
    this.witnessed = new Map();
    for (const [n, h] of Verifier.headLines(path, bad)) {
      if (h.run_id !== this.runId) continue;
      try {
        need(h, 'sequence', 'integer', 'signed_head');
        need(h, 'head_hash', 'string', 'signed_head');
        readSignedHead(h);
      } catch (e) {
        if (e instanceof Invalid) bad(`line ${n}: ${e.message}`);
        throw e;
      }
      if (this.pinned.size) {
        const k = this.pinned.get(h.key_id);
        if (!k || !k.windows.every((w) => insideWindow(h.signed_at, w)) || !verifies(k.raw, h)) {
          bad(`line ${n}: the head at ${h.sequence} does not verify under the pinned keys`);
        }
      }
      const seen = this.witnessed.get(h.sequence);
      if (seen !== undefined && seen !== h.head_hash) bad(`two heads at sequence ${h.sequence} with different hashes`);
      this.witnessed.set(h.sequence, h.head_hash);
    }
  }

  report() {
    return {
      valid: true,
      run_id: this.runId,
      head_sequence: this.head.seq,
      head_hash: this.head.hash,
      entries: this.counts.entries,
      signed_heads: this.counts.signed_heads,
      head_key_id: this.headKeyId,
      policies: this.counts.policies,
      admissions: this.counts.admissions,
      blobs: this.counts.blobs,
      blobs_absent: this.blobsAbsent,
      commands: this.charged.size,
      trusted_from_bundle: this.opts.trustedKeys.length === 0,
      unsigned_heads_accepted: this.unsignedAccepted,
      witnessed_heads: this.witnessed ? this.witnessed.size : 0,
    };
  }
}

const ADMISSION_MEMBERS = [
  ['request_id', 'string'], ['operator_identity', 'string'], ['settlement_sequence', 'integer'],
  ['claim_sequence', 'integer'], ['digests', 'object'], ['policy_revision', 'integer'], ['version', 'integer'],
  ['derived_checkpoint_digest', 'string'], ['execution_request_id', 'string'],
];
const ADMISSION_DIGESTS = ['candidate_digest', 'run_digest', 'journal_digest', 'policy_digest'];

function canonOrText(v) {
  try { return canon(v); } catch { return String(v); }
}

// ---------------------------------------------------------------- command line

const USAGE = `usage: verify.mjs [--json] [--trusted-key FILE]... [--trust-bundle-keys]
                  [--known-heads HEADS] [--require-blobs] [--allow-unsigned-head] BUNDLE

Exit status: 0 verified, 1 broken (first broken sequence named), 2 usage error.`;

function main(argv) {
  let args;
  try {
    args = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        json: { type: 'boolean' },
        'trusted-key': { type: 'string', multiple: true },
        'trust-bundle-keys': { type: 'boolean' },
        'known-heads': { type: 'string' },
        'require-blobs': { type: 'boolean' },
        'allow-unsigned-head': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (e) {
    process.stderr.write(`${USAGE}\nverify.mjs: ${e.message}\n`);
    return 2;
  }
  const o = args.values;
  if (o.help) { process.stdout.write(USAGE + '\n'); return 0; }
  if (args.positionals.length !== 1) {
    process.stderr.write(`${USAGE}\nverify.mjs: exactly one BUNDLE expected\n`);
    return 2;
  }
  const opts = {
    trustedKeys: o['trusted-key'] || [],
    trustBundleKeys: !!o['trust-bundle-keys'],
    knownHeads: o['known-heads'],
    requireBlobs: !!o['require-blobs'],
    allowUnsignedHead: !!o['allow-unsigned-head'],
  };
  // N8: a bundle's own keys prove nothing about who wrote it.
  if (!opts.trustedKeys.length && !opts.trustBundleKeys) {
    process.stderr.write('verify.mjs: no trusted key: pass --trusted-key KEYS (fetched out of band), or --trust-bundle-keys to check internal consistency only\n');
    return 2;
  }
  let report;
  try {
    report = new Verifier(opts).run(args.positionals[0]);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`verify.mjs: ${e.message}\n`);
      return 2;
    }
    if (!(e instanceof Break)) throw e;
    if (o.json) {
      process.stdout.write(JSON.stringify({ valid: false, first_broken_sequence: e.sequence, problem: e.problem, detail: e.detail, line: e.line }, null, 2) + '\n');
    } else {
      process.stdout.write(`BROKEN at sequence ${e.sequence}: ${e.problem}: ${e.detail} (bundle line ${e.line})\n`);
    }
    return 1;
  }
  if (o.json) {
    process.stdout.write(JSON.stringify(report, null, 2) + '\n');
  } else {
    const lines = [
      `VERIFIED  run ${report.run_id}`,
      `  entries        ${report.entries} (head ${report.head_sequence} ${report.head_hash})`,
      `  signed heads   ${report.signed_heads}${report.head_key_id ? `; head signed by ${report.head_key_id}` : ''}`,
      report.trusted_from_bundle
        ? '  trusted        ONLY INTERNAL CONSISTENCY CHECKED: the keys are the bundle\'s own (--trust-bundle-keys)'
        : '  trusted        every signed head by keys given with --trusted-key',
      `  unsigned       ${report.unsigned_heads_accepted} heads accepted without a signature`,
      `  witnessed      ${report.witnessed_heads} heads a monitor saw, all extended`,
      `  blobs          ${report.blobs} intact, ${report.blobs_absent.length} not stored`,
      `  policies       ${report.policies}`,
      `  admissions     ${report.admissions}`,
      `  commands       ${report.commands}`,
      ...report.blobs_absent.map((d) => `  not stored     ${d}`),
    ];
    process.stdout.write(lines.join('\n') + '\n');
  }
  return 0;
}

process.exitCode = main(process.argv.slice(2));
