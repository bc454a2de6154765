/**
 * `npm run bench:encryption`: the CPU time of sealing and opening one
 * recorded outcome shaped like the bench route's (an order view and its
 * `Location` and `Content-Type`), in this process, without HTTP or a
 * database. Prints the best of several runs of each, in microseconds, next to
 * the plaintext encoding for scale, and what deriving a record key costs with
 * `crypto.hkdfSync` against the module's extract-once HKDF (same bytes).
 */
import { createHash, createHmac, createSecretKey, hkdfSync, randomBytes } from 'node:crypto';
import { OutcomeCodec } from '../src/idempotency/outcome-codec.js';
import { masterKeys } from '../src/idempotency/outcome-encryption.js';

const RUNS = 8;
const ITERATIONS = 20_000;

const id = { scope: 'tenant:bench', operation: 'POST /bench/orders/idempotent', key: 'lq3x9k2a1b2c3.first.r1.measure-12345' };
const orderId = '8f1c1b1e-1111-2222-3333-444455556666';
const outcome = {
  status: 201,
  headers: { location: `/orders/${orderId}`, 'content-type': 'application/json; charset=utf-8' },
  body: JSON.stringify({ id: orderId, tenant: 'bench', sku: 'bench-sku-1', quantity: 2, note: null, status: 'created', createdAt: new Date().toISOString() }),
};

const sealed = new OutcomeCodec({ keys: masterKeys([{ id: 'bench', key: randomBytes(32) }]), acceptPlaintext: false });
const plain = new OutcomeCodec(undefined);
const sealedColumns = { response_status: outcome.status, response_headers: null, response_body: sealed.encode(id, outcome).body };
const plainColumns = { response_status: outcome.status, response_headers: outcome.headers, response_body: outcome.body };

// The record-key derivation both ways, on the same inputs as the module's (see outcome-encryption.ts).
const master = randomBytes(32);
const masterKey = createSecretKey(master);
const salt = Buffer.from('nest-idempotency/outcome-key/v1');
const prk = createSecretKey(createHmac('sha256', salt).update(master).digest());
const identity = () => createHash('sha256').update(`${id.scope}${id.operation}${id.key}`).digest();
const viaHkdfSync = () => Buffer.from(hkdfSync('sha256', masterKey, salt, Buffer.concat([Buffer.from('record:'), identity()]), 32));
const viaExtractOnce = () => createHmac('sha256', prk).update('record:').update(identity()).update(Buffer.from([1])).digest();
if (!viaHkdfSync().equals(viaExtractOnce())) throw new Error('the two derivations differ');

const cases: Record<string, () => unknown> = {
  'record key, hkdfSync': viaHkdfSync,
  'record key, extract once': viaExtractOnce,
  'seal (encode, encrypted)': () => sealed.encode(id, outcome),
  'open (decode, encrypted)': () => sealed.decode(id, sealedColumns),
  'encode, plaintext': () => plain.encode(id, outcome),
  'decode, plaintext': () => plain.decode(id, plainColumns),
};

const best: Record<string, number> = {};
for (let run = 0; run < RUNS; run++) {
  for (const [name, work] of Object.entries(cases)) {
    const started = performance.now();
    for (let i = 0; i < ITERATIONS; i++) work();
    best[name] = Math.min(best[name] ?? Infinity, ((performance.now() - started) / ITERATIONS) * 1000);
  }
}
const plaintextBytes = Buffer.byteLength(JSON.stringify(outcome.headers)) + Buffer.byteLength(outcome.body);
console.log(`one outcome: ${Buffer.byteLength(outcome.body)}-byte body, ${plaintextBytes} bytes with its headers' JSON; sealed ${sealedColumns.response_body!.length} characters`);
for (const [name, micros] of Object.entries(best)) console.log(`${name.padEnd(26)} ${micros.toFixed(1).padStart(6)} µs  (best of ${RUNS} runs of ${ITERATIONS})`);
