import pg from 'pg';
import { type DemoProcess, startDemoProcess } from './support/demo-process.js';
import { HTTP_ADAPTERS } from './support/http-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

const ACME = 'Bearer demo-key-acme';
const GLOBEX = 'Bearer demo-key-globex';
/** These tests take no payments. */
const UNUSED_PROVIDER = 'http://127.0.0.1:9';
const OPERATION = 'graphql Mutation.createOrder';

const CREATE = `mutation Create($input: CreateOrderInput!, $key: String) {
  createOrder(input: $input, idempotencyKey: $key) { id tenant sku quantity note status createdAt }
}`;

interface GraphqlError {
  message: string;
  path?: Array<string | number>;
  extensions?: Record<string, unknown>;
}

interface GraphqlAnswer {
  status: number;
  headers: Headers;
  data: Record<string, any> | null;
  errors: GraphqlError[] | undefined;
  extensions: { idempotency?: { replayed: boolean; fields: Record<string, { replayed: boolean }> } } | undefined;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The GraphQL contract of `@Idempotent()` on a mutation, against the demo's
 * `/graphql`: Apollo on Express, Mercurius on Fastify. The demo runs as a
 * child process, as `npm start` runs it.
 */
describe.each(HTTP_ADAPTERS)('GraphQL mutations on the demo (%s)', (adapter) => {
  let db: TestDatabase;
  let demo: DemoProcess;
  let keySeq = 0;
  const newKey = () => `gql-${adapter}-${++keySeq}-${Date.now()}`;

  const graphql = async (query: string, variables: object = {}, headers: Record<string, string> = {}): Promise<GraphqlAnswer> => {
    const response = await fetch(`${demo.url}/graphql`, {
      method: 'POST',
      headers: { authorization: ACME, 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ query, variables }),
    });
    const body = (await response.json()) as Omit<GraphqlAnswer, 'status' | 'headers'>;
    return { status: response.status, headers: response.headers, data: body.data ?? null, errors: body.errors, extensions: body.extensions };
  };
  const createOrder = (key: string | undefined, input: object, headers: Record<string, string> = {}) => graphql(CREATE, { input, key }, headers);
  const ordersWith = async (sku: string) => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM orders WHERE sku = $1`, [sku]))[0].n);
  const recordsOf = (key: string) => db.query<{ scope: string; operation: string; status: string }>(`SELECT scope, operation, status FROM idempotency_records WHERE key = $1 ORDER BY scope`, [key]);
  const errorOf = (answer: GraphqlAnswer) => {
    expect(answer.errors).toHaveLength(1);
    return answer.errors![0];
  };

  /** Holds inserts into `orders` until `release()`, so that an owner stays in flight after its claim. */
  const holdOrders = async () => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    await client.query(`BEGIN; LOCK TABLE orders IN SHARE ROW EXCLUSIVE MODE`);
    return {
      /** Resolves once `n` statements of the demo wait on the lock. */
      waiters: async (n: number) => {
        for (let i = 0; i < 400; i++) {
          const [{ waiting }] = await db.query<{ waiting: number }>(
            `SELECT count(*)::int AS waiting FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE 'INSERT INTO "orders"%'`,
          );
          if (waiting >= n) return;
          await sleep(25);
        }
        throw new Error(`no ${n} statement(s) waiting on orders`);
      },
      release: async () => {
        await client.query('ROLLBACK');
        await client.end();
      },
    };
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    demo = await startDemoProcess({ DATABASE_URL: db.url, HTTP_ADAPTER: adapter, PAYMENT_PROVIDER_URL: UNUSED_PROVIDER, REAPER_INTERVAL_MS: '0' });
  });
  afterAll(async () => {
    await demo?.stop();
    await db?.drop();
  });

  it('runs createOrder once and replays its field value, marked as a replay', async () => {
    const key = newKey();
    const input = { sku: 'gql-replay', quantity: 2, note: 'gift' };
    const first = await createOrder(key, input);
    expect(first.status).toBe(200);
    expect(first.errors).toBeUndefined();
    expect(first.data!.createOrder).toMatchObject({ tenant: 'acme', sku: 'gql-replay', quantity: 2, note: 'gift', status: 'created' });
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(first.extensions?.idempotency).toEqual({ replayed: false, fields: { createOrder: { replayed: false } } });

    const replay = await createOrder(key, input);
    expect(replay.status).toBe(200);
    expect(JSON.stringify(replay.data)).toBe(JSON.stringify(first.data));
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.extensions?.idempotency).toEqual({ replayed: true, fields: { createOrder: { replayed: true } } });

    expect(await ordersWith('gql-replay')).toBe(1);
    expect(await recordsOf(key)).toEqual([{ scope: 'tenant:acme', operation: OPERATION, status: 'completed' }]);
    const metrics = await (await fetch(`${demo.url}/metrics`)).text();
    expect(metrics).toContain(`idempotency_replays_total{operation="${OPERATION}",path="immediate"} 1`);
  });

  it('answers 422 key-reused for the key with other arguments, and runs nothing', async () => {
    const key = newKey();
    expect((await createOrder(key, { sku: 'gql-reuse', quantity: 1 })).errors).toBeUndefined();
    const reused = await createOrder(key, { sku: 'gql-reuse', quantity: 3 });
    expect(reused.data).toBeNull();
    expect(errorOf(reused)).toMatchObject({
      path: ['createOrder'],
      extensions: { code: 'IDEMPOTENCY_KEY_REUSED', status: 422, type: 'urn:nest-idempotency:problem:key-reused', title: 'Idempotency key reused' },
    });
    expect(await ordersWith('gql-reuse')).toBe(1);
  });

  it('answers 400 to a mutation without a key, or with a malformed one, and stores nothing', async () => {
    const missing = await createOrder(undefined, { sku: 'gql-no-key', quantity: 1 });
    expect(errorOf(missing)).toMatchObject({
      message: 'This mutation requires a key: an idempotencyKey argument or an Idempotency-Key header.',
      extensions: { code: 'IDEMPOTENCY_KEY_MISSING', status: 400, type: 'urn:nest-idempotency:problem:key-missing' },
    });
    for (const key of ['', 'has space', 'k'.repeat(256), 'clé']) {
      const malformed = await createOrder(key, { sku: 'gql-no-key', quantity: 1 });
      expect(errorOf(malformed)).toMatchObject({
        message: expect.stringMatching(/^The idempotencyKey argument is malformed: /),
        extensions: { code: 'IDEMPOTENCY_KEY_MALFORMED', status: 400, type: 'urn:nest-idempotency:problem:key-malformed' },
      });
    }
    const badHeader = await createOrder(undefined, { sku: 'gql-no-key', quantity: 1 }, { 'idempotency-key': 'has space' });
    expect(errorOf(badHeader)).toMatchObject({
      message: expect.stringMatching(/^The Idempotency-Key header is malformed: /),
      extensions: { code: 'IDEMPOTENCY_KEY_MALFORMED', status: 400 },
    });
    expect(await ordersWith('gql-no-key')).toBe(0);
  });

  it('takes the key from the Idempotency-Key header without an argument, and from the argument over the header', async () => {
    const headerKey = newKey();
    const fromHeader = await createOrder(undefined, { sku: 'gql-header', quantity: 1 }, { 'idempotency-key': headerKey });
    expect(fromHeader.errors).toBeUndefined();
    const replay = await createOrder(undefined, { sku: 'gql-header', quantity: 1 }, { 'idempotency-key': headerKey });
    expect(replay.extensions?.idempotency?.replayed).toBe(true);
    expect(replay.data).toEqual(fromHeader.data);
    expect(await recordsOf(headerKey)).toEqual([expect.objectContaining({ operation: OPERATION })]);

    const argumentKey = newKey();
    const both = await createOrder(argumentKey, { sku: 'gql-header', quantity: 1 }, { 'idempotency-key': headerKey });
    expect(both.extensions?.idempotency?.replayed).toBe(false);
    expect(both.data!.createOrder.id).not.toBe(fromHeader.data!.createOrder.id);
    expect(await recordsOf(argumentKey)).toHaveLength(1);
    expect(await ordersWith('gql-header')).toBe(2);
  });

  it('creates exactly one order from concurrent duplicates', async () => {
    const key = newKey();
    const answers = await Promise.all(Array.from({ length: 8 }, () => createOrder(key, { sku: 'gql-burst', quantity: 5 })));
    const succeeded = answers.filter((answer) => !answer.errors);
    for (const answer of answers.filter((answer) => answer.errors)) expect(errorOf(answer).extensions).toMatchObject({ code: 'IDEMPOTENCY_REQUEST_IN_PROGRESS' });
    expect(succeeded.filter((answer) => answer.extensions?.idempotency?.replayed === false)).toHaveLength(1);
    for (const answer of succeeded) expect(answer.data).toEqual(succeeded[0].data);
    expect(await ordersWith('gql-burst')).toBe(1);
  });

  it('makes a duplicate wait for the owner in flight, then replay what it committed', async () => {
    const key = newKey();
    const orders = await holdOrders();
    const owner = createOrder(key, { sku: 'gql-wait', quantity: 1 });
    try {
      await orders.waiters(1);
      const duplicate = createOrder(key, { sku: 'gql-wait', quantity: 1 });
      await sleep(200);
      await orders.release();
      const [first, second] = await Promise.all([owner, duplicate]);
      expect(first.extensions?.idempotency?.replayed).toBe(false);
      expect(second.extensions?.idempotency?.replayed).toBe(true);
      expect(second.data).toEqual(first.data);
    } finally {
      await orders.release().catch(() => undefined);
    }
    expect(await ordersWith('gql-wait')).toBe(1);
  });

  it('answers 409 with retryAfter while the owner holds the key longer than wait', async () => {
    const key = newKey();
    const orders = await holdOrders();
    const owner = createOrder(key, { sku: 'gql-conflict', quantity: 1 });
    try {
      await orders.waiters(1);
      const conflict = await createOrder(key, { sku: 'gql-conflict', quantity: 1 }); // the demo's wait is 1 s
      expect(conflict.data).toBeNull();
      expect(errorOf(conflict)).toMatchObject({
        path: ['createOrder'],
        extensions: { code: 'IDEMPOTENCY_REQUEST_IN_PROGRESS', status: 409, type: 'urn:nest-idempotency:problem:request-in-progress', retryAfter: 1 },
      });
    } finally {
      await orders.release();
    }
    expect((await owner).errors).toBeUndefined();
    expect((await createOrder(key, { sku: 'gql-conflict', quantity: 1 })).extensions?.idempotency?.replayed).toBe(true);
    expect(await ordersWith('gql-conflict')).toBe(1);
  });

  it('leaves queries alone: no key needed, nothing recorded', async () => {
    const records = async () => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM idempotency_records`))[0].n);
    const before = await records();
    const listed = await graphql(`{ orders(limit: 2) { id sku } }`, {}, { 'idempotency-key': newKey() });
    expect(listed.errors).toBeUndefined();
    expect(listed.data!.orders.length).toBeGreaterThan(0);
    expect(listed.extensions?.idempotency).toBeUndefined();
    expect(listed.headers.get('idempotent-replayed')).toBeNull();
    expect(await records()).toBe(before);
  });

  it('scopes keys by tenant', async () => {
    const key = newKey();
    const acme = await createOrder(key, { sku: 'gql-tenants', quantity: 1 });
    const globex = await createOrder(key, { sku: 'gql-tenants', quantity: 1 }, { authorization: GLOBEX });
    expect(globex.extensions?.idempotency?.replayed).toBe(false);
    expect(globex.data!.createOrder).toMatchObject({ tenant: 'globex' });
    expect(globex.data!.createOrder.id).not.toBe(acme.data!.createOrder.id);
    expect((await recordsOf(key)).map((record) => record.scope)).toEqual(['tenant:acme', 'tenant:globex']);
  });

  it('records each protected field of an operation on its own, in its own transaction', async () => {
    const [first, second, third] = [newKey(), newKey(), newKey()];
    const twoFields = `mutation Two($a: String, $b: String) {
      a: createOrder(idempotencyKey: $a, input: { sku: "gql-two-a", quantity: 1 }) { id sku }
      b: createOrder(idempotencyKey: $b, input: { sku: "gql-two-b", quantity: 2 }) { id sku }
    }`;
    const ran = await graphql(twoFields, { a: first, b: second });
    expect(ran.errors).toBeUndefined();
    expect(ran.extensions?.idempotency).toEqual({ replayed: false, fields: { a: { replayed: false }, b: { replayed: false } } });

    const replayed = await graphql(twoFields, { a: first, b: second });
    expect(JSON.stringify(replayed.data)).toBe(JSON.stringify(ran.data));
    expect(replayed.extensions?.idempotency).toEqual({ replayed: true, fields: { a: { replayed: true }, b: { replayed: true } } });
    // Two fields answered: the HTTP response is not one replay, so the header stays off.
    expect(replayed.headers.get('idempotent-replayed')).toBeNull();

    const mixed = await graphql(twoFields, { a: first, b: third });
    expect(mixed.extensions?.idempotency).toEqual({ replayed: false, fields: { a: { replayed: true }, b: { replayed: false } } });
    expect(mixed.data!.a).toEqual(ran.data!.a);
    expect(mixed.data!.b.id).not.toBe(ran.data!.b.id);
    expect([await ordersWith('gql-two-a'), await ordersWith('gql-two-b')]).toEqual([1, 2]);
    expect((await recordsOf(third))[0]).toMatchObject({ operation: OPERATION, status: 'completed' });
  });

  it('keeps an earlier field committed when a later one fails, and replays it on the retry', async () => {
    const [kept, reused] = [newKey(), newKey()];
    await createOrder(reused, { sku: 'gql-partial-other', quantity: 1 });
    const partial = `mutation Partial($kept: String, $reused: String) {
      kept: createOrder(idempotencyKey: $kept, input: { sku: "gql-partial", quantity: 1 }) { id }
      reused: createOrder(idempotencyKey: $reused, input: { sku: "gql-partial", quantity: 9 }) { id }
    }`;
    const failed = await graphql(partial, { kept, reused });
    // createOrder is non-null, so the failure nulls all of data; the first field's transaction had committed by then.
    expect(failed.data).toBeNull();
    expect(errorOf(failed)).toMatchObject({ path: ['reused'], extensions: { code: 'IDEMPOTENCY_KEY_REUSED', status: 422 } });
    expect(await recordsOf(kept)).toEqual([expect.objectContaining({ status: 'completed' })]);
    expect(await ordersWith('gql-partial')).toBe(1);

    const retried = await graphql(`mutation Retry($kept: String) { kept: createOrder(idempotencyKey: $kept, input: { sku: "gql-partial", quantity: 1 }) { id } }`, { kept });
    expect(retried.extensions?.idempotency).toEqual({ replayed: true, fields: { kept: { replayed: true } } });
    expect(await ordersWith('gql-partial')).toBe(1);
  });

  it('records nothing when the arguments fail validation, so the key stays free', async () => {
    const key = newKey();
    const invalid = await createOrder(key, { sku: '', quantity: 1 });
    expect(invalid.data).toBeNull();
    expect(invalid.errors).toHaveLength(1);
    expect(await recordsOf(key)).toEqual([]);
    const valid = await createOrder(key, { sku: 'gql-valid-later', quantity: 1 });
    expect(valid.extensions?.idempotency?.replayed).toBe(false);
    expect(await ordersWith('gql-valid-later')).toBe(1);
  });

  it('sends Idempotent-Replayed only when the one field behind fragments replayed, never when another ran', async () => {
    const [first, second] = [newKey(), newKey()];
    expect((await createOrder(first, { sku: 'gql-fragment', quantity: 1 })).errors).toBeUndefined();
    const inline = `mutation Inline($a: String, $b: String) {
      ... on Mutation {
        a: createOrder(idempotencyKey: $a, input: { sku: "gql-fragment", quantity: 1 }) { id }
        b: createOrder(idempotencyKey: $b, input: { sku: "gql-fragment", quantity: 1 }) { id }
      }
    }`;
    const mixed = await graphql(inline, { a: first, b: second });
    expect(mixed.extensions?.idempotency).toEqual({ replayed: false, fields: { a: { replayed: true }, b: { replayed: false } } });
    expect(mixed.headers.get('idempotent-replayed')).toBeNull();
    const named = `mutation Named($a: String, $b: String) { ...Both }
      fragment Both on Mutation {
        a: createOrder(idempotencyKey: $a, input: { sku: "gql-fragment", quantity: 1 }) { id }
        b: createOrder(idempotencyKey: $b, input: { sku: "gql-fragment", quantity: 1 }) { id }
      }`;
    const third = newKey();
    const spread = await graphql(named, { a: first, b: third });
    expect(spread.extensions?.idempotency).toEqual({ replayed: false, fields: { a: { replayed: true }, b: { replayed: false } } });
    expect(spread.headers.get('idempotent-replayed')).toBeNull();
    expect(await ordersWith('gql-fragment')).toBe(3);
    // One field behind a fragment is the whole response: a replay of it says so.
    const alone = await graphql(`mutation Alone($a: String) { ... on Mutation { createOrder(idempotencyKey: $a, input: { sku: "gql-fragment", quantity: 1 }) { id } } }`, { a: first });
    expect(alone.extensions?.idempotency?.replayed).toBe(true);
    expect(alone.headers.get('idempotent-replayed')).toBe('true');
  });

  it('refuses a NUL in a query’s string literal as it refuses one in its variables: nothing recorded, nothing logged as an error', async () => {
    const [literalKey, variableKey] = [newKey(), newKey()];
    const logged = demo.output().length;
    const literal = await graphql(`mutation { createOrder(idempotencyKey: "${literalKey}", input: { sku: "gql-nul\\u0000x", quantity: 1 }) { id } }`);
    const variable = await createOrder(variableKey, { sku: 'gql-nul\u0000x', quantity: 1 });
    expect(variable.errors).toHaveLength(1);
    expect(literal.data).toBeNull();
    expect(errorOf(literal).extensions?.code).toBe(variable.errors![0].extensions?.code);
    expect(errorOf(literal).message).toBe(variable.errors![0].message);
    expect([await recordsOf(literalKey), await recordsOf(variableKey)]).toEqual([[], []]);
    expect(await db.query(`SELECT 1 FROM orders WHERE sku LIKE 'gql-nul%'`)).toEqual([]);
    expect(demo.output().slice(logged)).not.toMatch(/ERROR|invalid byte sequence/);
  });
});
