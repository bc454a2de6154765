import type { HttpException, InjectionToken, NestInterceptor, Type } from '@nestjs/common';
import type { IdempotencyEvent } from '../events/idempotency-event.types.js';
import type { ResolvedEncryptionOptions } from '../records/outcome-encryption.js';
import type { EncryptionKey } from '../records/encryption-keys.js';
import type { FingerprintFields } from '../fingerprint/request-fingerprint.js';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';

/** Options of `IdempotencyModule.forRoot()` / `forRootAsync()`. */
export interface IdempotencyModuleOptions {
  /**
   * The DataSource the module serves: a connection name as given to
   * `TypeOrmModule.forRoot({ name })`, or the injection token of a
   * DataSource provider (`getDataSourceToken('main')`, a class, a symbol).
   * The claims, the records and the business writes that join them all live
   * there. Default: the default DataSource.
   */
  dataSource?: InjectionToken;
  /**
   * The schema of the module's tables (`idempotency_records`,
   * `idempotency_outbox`). Every statement the module sends names its table
   * in it, so a handler's `SET LOCAL search_path TO tenant_x` (a schema per
   * tenant) or a role's search_path never redirects one. Default: the schema
   * where the migration put the table, which is where the served
   * DataSource's search_path finds `idempotency_records`, looked up once at
   * startup. Give it when the table is off that search_path.
   *
   * @example
   * IdempotencyModule.forRoot({ schema: 'idempotency' })
   */
  schema?: string;
  /** How long, in ms, a recorded outcome replays. Default 24 hours. */
  retention?: number;
  /** The request header that carries the key. Default `Idempotency-Key`. */
  headerName?: string;
  /**
   * Required: the scope of a request's keys. A resolver, e.g.
   * `(request) => request.user?.tenantId`, scopes them by the tenant it
   * returns, so one tenant never replays another's responses; a request it
   * finds no tenant for (`undefined`, `null` or `''`) is answered 401
   * (`IdempotencyTenantUnresolvedException`) before anything is claimed or
   * run. `'shared'` puts every request in one scope (stored as `anonymous`),
   * for an app whose callers may all see each other's answers. The module
   * refuses to start without it.
   *
   * @example
   * IdempotencyModule.forRoot({ tenant: (request) => request.user?.tenantId })
   */
  tenant: ((request: any) => string | undefined | null) | 'shared';
  /**
   * Response headers recorded and replayed. Default `Location`,
   * `Content-Type` and `ETag`. `Set-Cookie` is never replayed. A body's
   * `Content-Type` is recorded with it even when the list leaves it out.
   */
  replayHeaders?: readonly string[];
  /**
   * How long, in ms, a duplicate waits for an in-flight request with the same
   * key before it gets 409 with `Retry-After`. On a one-transaction route
   * it holds a pool connection while it waits on the owner's row; on a
   * phased route it polls, and holds none between polls. Default 1000.
   */
  wait?: number;
  /**
   * How long, in ms, a one-transaction request waits for its handler's own
   * work to settle once an operator gave up on its Observable: a `timeout()`
   * bound inside `@Idempotent()` or around it, a `Promise.all` that rejected
   * while another branch still runs. Until then the request's transaction
   * stays open, so its key stays claimed (a retry waits and replays, or gets
   * 409) and the late writes still go into it; then it rolls back. A write
   * the handler makes after that throws `TransactionClosedError`. The
   * client has its answer meanwhile, unless the answer is one that
   * `storeErrors` records. Each such request holds its connection until
   * then. Default 30 000.
   */
  settleTimeout?: number;
  /**
   * How long, in ms, the owner of a phased operation holds its claim without
   * renewing it (it renews while alive). Once it lapses, a retry or the
   * reaper takes the claim over and resumes. Default 30 s.
   */
  lease?: number;
  /** Attempts at a phased operation before it is marked failed. Default 5. */
  maxAttempts?: number;
  /** The scheduled reaper; `false` turns it off. */
  reaper?: ReaperOptions | false;
  /**
   * Completed outcomes kept in process, so that a replay on the same instance
   * costs no database round trip. Exact until each record's `expires_at`,
   * since a completed record never changes; 0 turns it off. Default 10000.
   * `replayCacheBytes` bounds the same cache by size: whichever bound is
   * reached first evicts the least recently used outcome.
   */
  replayCacheSize?: number;
  /**
   * How many bytes the replay cache may hold, counted in UTF-8: bodies,
   * header names and values, keys and fingerprints. Bodies over 64 KiB are
   * never cached. 0 turns the cache off. Default 32 MiB.
   */
  replayCacheBytes?: number;
  /**
   * Whether a replay the cache does not answer is read by primary key before
   * any claim, while an operation's keys are often found held (a moving
   * average). Off, every such replay goes through the claim.
   * Default true.
   */
  readFirst?: boolean;
  /**
   * Whether the module sends its statements as named prepared statements,
   * parsed once per connection. A check at startup turns them off behind a
   * pooler that loses them between transactions (PgBouncer in transaction
   * or statement mode before 1.21, or without `max_prepared_statements`),
   * with a warning; so does such a loss later, which answers that one
   * request 503. `false` starts unnamed and skips the check. Default true.
   */
  preparedStatements?: boolean;
  /**
   * How the claim's transaction reaches the database. `'pg'`: on the
   * QueryRunner's node-postgres client, with named prepared statements, and
   * pipelined on a connection with `extra: { pipeline: true }`; it falls
   * back to `'typeorm'`, with a warning, on a connection without the pg and
   * TypeORM internals it relies on. `'typeorm'`: through the QueryRunner's
   * public API only (`startTransaction`, `query`, `commitTransaction`), one
   * statement at a time and unnamed, so TypeORM's transaction subscribers
   * and query logging see the module's transaction; it costs a round trip
   * more than `'pg'` without pipelining. Default `'pg'`.
   */
  claimDriver?: ClaimDriverName;
  /**
   * Whether each unit of the handler's writes (a statement, a `save()`, a
   * `transaction()` callback) runs behind a savepoint of its own, so that a
   * failure the handler catches undoes that unit alone and the request's
   * transaction goes on, as it would with a connection per call. Default
   * true. `false` sends no savepoint: the request's transaction is aborted
   * at the first failed statement, so a handler that catches a database
   * error and carries on gets `UnitFailedWithoutSavepointError` at its next
   * write, or as its answer, and nothing commits. It saves PostgreSQL a
   * subtransaction per unit that writes (two statements, and an xid of its
   * own): only for apps whose handlers let every database error propagate,
   * and that run long transactions beside the requests, where
   * subtransactions slow standbys down (docs/performance.md).
   */
  unitSavepoints?: boolean;
  /**
   * The largest request body, in bytes, that the module reads itself to
   * fingerprint it: a body no parser has read when the route's interceptor
   * runs (a multipart upload that a `FileInterceptor` inside `@Idempotent()`
   * parses later, text on Express without a text parser, binary). Such a
   * body waits in memory until the handler reads it; a larger one is
   * refused with 413 before the handler runs. Bodies parsed before the route
   * (JSON, forms) are not counted. Default: Fastify's `bodyLimit` on
   * Fastify, else 1 MiB; a route's `@Idempotent({ maxBodyBytes })` wins.
   */
  maxBodyBytes?: number;
  /**
   * Whether `@Idempotent()` routes document their key header, the replay
   * header and their problem responses in OpenAPI, when `@nestjs/swagger` is
   * installed (without it they are left undocumented either way). `false`
   * leaves the documentation to you. Default true.
   */
  openapi?: boolean;
  /**
   * Encryption at rest of recorded outcomes: headers and body sealed
   * together with AES-256-GCM, under a key derived per record; and of the
   * request fingerprints, stored as HMACs under a key derived from the same
   * keys, so that the table's readers cannot check guesses of a request.
   * Default: off, outcomes are stored as sent and fingerprints as SHA-256s.
   *
   * @example
   * encryption: { keys: [{ id: '2025-06', key: process.env.IDEMPOTENCY_KEY_2025_06! }, { id: '2024-12', key: oldKey }] }
   */
  encryption?: EncryptionOptions;
  /** Called with every outcome (attempts, commit failures, reaper passes, lease expiries); keys are hashed. */
  onEvent?: (event: IdempotencyEvent) => void;
  /**
   * Interceptors you vouch for: they may run around `@Idempotent()` routes.
   * The module records a handler's outcome inside every interceptor bound
   * around it (global ones, and those bound outside `@Idempotent()`). It
   * refuses to start while a `ClassSerializerInterceptor` (or a subclass)
   * not listed here runs around one, and warns once at startup about any
   * other interceptor not listed here, since it cannot tell whether it
   * reshapes bodies. Classes (matched exactly) or instances. Default none.
   *
   * @example
   * IdempotencyModule.forRoot({ allowInterceptorsAround: [RequestLoggingInterceptor] })
   */
  allowInterceptorsAround?: ReadonlyArray<Type<NestInterceptor> | NestInterceptor>;
}

/** Encryption at rest of recorded outcomes. */
export interface EncryptionOptions {
  /**
   * Master keys, 32 bytes each (a Buffer, or a base64 or base64url string),
   * each with an id that the records it seals carry. New outcomes are sealed
   * and fingerprinted with the first; a record opens, and its fingerprint is
   * checked, with whichever listed key it names. To rotate, put the new key
   * first and keep the old ones until the records they sealed have expired.
   */
  keys: readonly EncryptionKey[];
  /**
   * Replay outcomes recorded in plaintext, as before encryption was turned
   * on. Default false: such a record answers a 500 problem
   * (`record-undecryptable`) and is not replayed. Turn it on while
   * encryption is rolled out over an existing table, and off again once the
   * plaintext records have expired. Plain fingerprints are checked either
   * way: a match of SHA-256s is as sure as one of HMACs.
   */
  acceptPlaintext?: boolean;
}

/** How the reaper deletes expired records and finishes abandoned claims. */
export interface ReaperOptions {
  /** Between passes, in ms. Default 10 s. */
  intervalMs?: number;
  /** Rows per DELETE statement. Default 1000. */
  batchSize?: number;
  /**
   * How long a pass may take, in ms: up to half of it finishes abandoned
   * phased claims (the operation still running then is stopped and released
   * for the next pass), the rest deletes expired records. Shutdown waits for
   * a pass at most this long. Default 2000.
   */
  timeBudgetMs?: number;
}

/** Options of `@Idempotent()` that apply to message handlers (`@EventPattern()`, `@MessagePattern()`). */
export interface IdempotentMessageOptions {
  /**
   * The key of a message. Default: its `Operation-Id` header (set by the
   * outbox relay), else its `Nats-Msg-Id` header, read through the
   * transport context's `getHeaders()`.
   */
  messageKey?: (data: any, context: any) => string | undefined | null;
  /** The tenant a message acts for, e.g. `(event) => event.tenant`: keys are scoped by it. Default: anonymous. */
  messageTenant?: (data: any, context: any) => string | undefined | null;
}

/** Options of `@Idempotent()` on one route. Unset ones come from the module. */
export interface IdempotentOptions {
  /** Names the operation in the key's scope. Default: method and route template, e.g. `POST /orders/:id/payments`. */
  operation?: string;
  /** Whether a request without a key gets 400. Default true; when false, such requests run unprotected. */
  required?: boolean;
  /** How long, in ms, this route's outcomes replay. */
  retention?: number;
  /** Which request fields must match on a retry. Default: path params, query and body. */
  fingerprint?: FingerprintFields;
  /** Part of the scope: bump it when the response shape changes, so old shapes never replay. */
  version?: string;
  /** How long, in ms, a duplicate waits for the in-flight request. */
  wait?: number;
  /**
   * The isolation level of the request's transaction, for a handler that
   * needs a stricter one than the app's own transactions get: a
   * `transaction('SERIALIZABLE', …)` or `SET TRANSACTION ISOLATION LEVEL`
   * inside the handler cannot raise it, since they become savepoints of the
   * request's transaction. Default: the level the app's transactions get,
   * the DataSource's `isolationLevel` (TypeORM 1.x), else the database's
   * `default_transaction_isolation` of the request's connection (read as
   * the pool made it, so a default changed while the app runs reaches new
   * connections), or @nestjs-cls/transactional's `defaultTxOptions.isolationLevel`
   * where stricter. At REPEATABLE READ and SERIALIZABLE a key is
   * claimed by inserting its record (a second write at commit completes it),
   * and a serialization failure answers 503 with `Retry-After`.
   */
  isolation?: IsolationLevel;
  /**
   * 4xx statuses of deterministic failures to record and replay, such as 402.
   * Any other error rolls back and releases the key. Default none. A
   * shorthand of `storeIf`: give one or the other.
   */
  storeErrors?: readonly number[];
  /**
   * Which failures to record and replay: called with the status and the
   * `HttpException` of each 4xx failure of the handler (validation errors
   * included); `true` records it, and its writes are undone. 5xx failures are
   * never recorded and never reach it: their writes rolled back, so a retry
   * runs again. Not for phased routes, whose abandoned operations the reaper
   * finishes without the route: use `storeErrors` there. Default none.
   *
   * @example
   * @Idempotent({ storeIf: (status, error) => status === 409 || (status === 402 && error instanceof CardDeclinedException) })
   */
  storeIf?: StoreErrorIf;
  /**
   * Run as a phased operation, for handlers with external side effects: the
   * claim commits first, under a lease, and the handler runs a
   * `@PhasedOperation()` under it through `@PhasedClaim()`. Default false.
   */
  phases?: boolean;
  /** The lease of this route's phased operations, in ms. */
  lease?: number;
  /** The largest body no parser read that this route's fingerprint reads (see the module's `maxBodyBytes`), e.g. for an upload route. */
  maxBodyBytes?: number;
}

/** A `maxBodyBytes` as given: unset, or a positive whole number of bytes. */
export function checkedBodyBound(bytes: unknown, where: string): number | undefined {
  if (bytes === undefined || (Number.isSafeInteger(bytes) && (bytes as number) > 0)) return bytes as number | undefined;
  throw new IdempotencyConfigurationError(`${where}: maxBodyBytes must be a positive whole number of bytes, got ${JSON.stringify(bytes)}.`);
}

/** The isolation levels PostgreSQL runs (READ UNCOMMITTED behaves as READ COMMITTED there). */
export type IsolationLevel = 'READ COMMITTED' | 'REPEATABLE READ' | 'SERIALIZABLE';

const ISOLATION_LEVELS: readonly IsolationLevel[] = ['READ COMMITTED', 'REPEATABLE READ', 'SERIALIZABLE'];

/**
 * A level as TypeORM or PostgreSQL spell it (`'SERIALIZABLE'`,
 * `'repeatable read'`, `'READ UNCOMMITTED'`), as PostgreSQL runs it; undefined
 * for anything else.
 */
export function isolationLevelOf(level: unknown): IsolationLevel | undefined {
  if (typeof level !== 'string') return undefined;
  const upper = level.trim().replace(/\s+/g, ' ').toUpperCase();
  return upper === 'READ UNCOMMITTED' ? 'READ COMMITTED' : ISOLATION_LEVELS.find((known) => known === upper);
}

/** Whether `level` guarantees at least what `than` does. */
export function isAtLeast(level: IsolationLevel, than: IsolationLevel): boolean {
  return ISOLATION_LEVELS.indexOf(level) >= ISOLATION_LEVELS.indexOf(than);
}

/** `schema`, checked where it is given: an empty name would name no schema at all. */
function checkedSchema(schema: unknown): string | undefined {
  if (schema === undefined || (typeof schema === 'string' && schema !== '')) return schema;
  throw new IdempotencyConfigurationError(`IdempotencyModule: schema must be the name of a schema (e.g. 'public'), or left out to use the one the migration created the table in; got ${JSON.stringify(schema)}.`);
}

/**
 * `tenant`, as stated: no default, since the one that would fit an app
 * without users (one shared scope) replays one user's answer to another in
 * an app with them.
 */
function checkedTenant(tenant: unknown): IdempotencyModuleOptions['tenant'] {
  if (tenant === 'shared' || typeof tenant === 'function') return tenant as IdempotencyModuleOptions['tenant'];
  throw new IdempotencyConfigurationError(
    `IdempotencyModule: \`tenant\` is required${tenant === undefined ? '' : ` (got ${JSON.stringify(tenant)})`}. ` +
      'Give a resolver, `tenant: (request) => request.user?.tenantId`, so one caller never replays another\'s response, ' +
      "or `tenant: 'shared'` where every caller may see every other caller's answers (one scope of keys).",
  );
}

/** Decides whether a 4xx failure of a handler is recorded and replayed. */
export type StoreErrorIf = (status: number, error: HttpException) => boolean;

/** The drivers of the claim's transaction (`claimDriver`). */
export type ClaimDriverName = 'pg' | 'typeorm';

/** The module options as the module runs with them, every default applied (public as `ResolvedIdempotencyOptions`). */
export interface ResolvedModuleOptions extends Required<Omit<IdempotencyModuleOptions, 'reaper' | 'onEvent' | 'encryption' | 'schema' | 'maxBodyBytes'>> {
  /** The `schema` option as given; unset, the startup check finds the table on the search_path. */
  schema: string | undefined;
  /** The `maxBodyBytes` option as given; unset, each route takes the app server's own bound (see `appBodyLimitOf`). */
  maxBodyBytes: number | undefined;
  /** The `onEvent` listener the module was given, if any. */
  onEvent?: (event: IdempotencyEvent) => void;
  reaper: Required<ReaperOptions> & { enabled: boolean };
  /** Unset: outcomes are stored in plaintext. */
  encryption: ResolvedEncryptionOptions | undefined;
}

/**
 * A handler's options over its controller's class-level ones: the handler's
 * win option by option (unset ones come from the class). `storeErrors` and
 * `storeIf` are one rule: a handler that gives either replaces the class's.
 */
export function mergeRouteOptions(classOptions: IdempotentOptions, handlerOptions: IdempotentOptions): IdempotentOptions {
  const own = Object.fromEntries(Object.entries(handlerOptions).filter(([, value]) => value !== undefined)) as IdempotentOptions;
  const { storeErrors, storeIf, ...rest } = classOptions;
  const errorRule = own.storeErrors !== undefined || own.storeIf !== undefined ? {} : { storeErrors, storeIf };
  return { ...rest, ...errorRule, ...own };
}

/** The one place module defaults live. */
export async function resolveModuleOptions(options: IdempotencyModuleOptions): Promise<ResolvedModuleOptions> {
  const replayHeaders = (options.replayHeaders ?? ['Location', 'Content-Type', 'ETag'])
    .map((name) => name.toLowerCase())
    .filter((name) => name !== 'set-cookie');
  const reaper = options.reaper || {};
  return {
    dataSource: options.dataSource ?? 'default',
    schema: checkedSchema(options.schema),
    retention: options.retention ?? 24 * 60 * 60 * 1000,
    headerName: options.headerName ?? 'Idempotency-Key',
    tenant: checkedTenant(options.tenant),
    replayHeaders,
    wait: options.wait ?? 1000,
    settleTimeout: options.settleTimeout ?? 30_000,
    lease: options.lease ?? 30_000,
    maxAttempts: options.maxAttempts ?? 5,
    onEvent: options.onEvent,
    replayCacheSize: options.replayCacheSize ?? 10_000,
    replayCacheBytes: options.replayCacheBytes ?? 32 * 1024 * 1024,
    readFirst: options.readFirst ?? true,
    preparedStatements: options.preparedStatements ?? true,
    claimDriver: options.claimDriver ?? 'pg',
    unitSavepoints: options.unitSavepoints ?? true,
    openapi: options.openapi ?? true,
    maxBodyBytes: checkedBodyBound(options.maxBodyBytes, 'IdempotencyModule'),
    encryption: options.encryption && (await import('../records/outcome-encryption.js')).resolveEncryption(options.encryption),
    allowInterceptorsAround: options.allowInterceptorsAround ?? [],
    reaper: {
      enabled: options.reaper !== false,
      intervalMs: reaper.intervalMs ?? 10_000,
      batchSize: reaper.batchSize ?? 1000,
      timeBudgetMs: reaper.timeBudgetMs ?? 2000,
    },
  };
}
