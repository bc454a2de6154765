import { StatementRefusedError } from '../errors/idempotency.exceptions.js';
import { effectOf, statementText } from './transaction-control.js';
import type { RunnerClient } from './typeorm-internals.js';

/** What the guard of the request's pg client asks of the request's transaction: `RequestTransaction`. */
export interface ClientGuard {
  /** Whether the statement sent now is one of the module's own, which passes as it is. */
  sendsOwn(): boolean;
  /** The error a statement of the app's meets now, once the request's transaction took no more of them; undefined while it does. */
  closedError(): Error | undefined;
  /** The error `statement` meets once the request's transaction lost a conflict (see `RequestTransaction.conflict`); undefined before. */
  conflictError(statement: unknown): Error | undefined;
}

/** Each guarded client, and the client it guards. */
const guardedClients = new WeakMap<object, object>();

/**
 * The request's node-postgres client as the handler's code may reach it:
 * the connection a joined QueryRunner's `connect()` answers, the request
 * QueryRunner's `databaseConnection`. The same client, whose `query()`
 * refuses, before anything is sent, a statement that would end or start the
 * request's transaction (a COMMIT sent there would commit the request's
 * claim with the handler's writes so far, whatever came after), and whose
 * `release()` gives nothing back: the connection goes back to the pool when
 * the request ends. After that, it takes no statement, and `end()` does not
 * close it. Everything else goes to the client as it is, into the request's
 * transaction, without a savepoint of its own.
 */
export function guardedClient<Client extends RunnerClient>(client: Client, guard: ClientGuard): Client {
  if (guardedClients.has(client)) return client;
  const target = client;
  const bound = new Map<PropertyKey, unknown>();
  const query = (statement: unknown, ...rest: unknown[]) => {
    if (guard.sendsOwn()) return target.query(statement, ...rest);
    const refusal = guard.closedError() ?? refusalOf(statement) ?? guard.conflictError(statement);
    if (!refusal) return target.query(statement, ...rest);
    // As node-postgres fails each form: a submittable (a cursor, a COPY stream) through its handleError, and returned.
    const submittable = statement as { submit?: unknown; handleError?: (error: Error) => void };
    if (typeof submittable?.submit === 'function') {
      queueMicrotask(() => submittable.handleError?.(refusal));
      return statement;
    }
    const callback = rest[rest.length - 1];
    if (typeof callback !== 'function') return Promise.reject(refusal);
    queueMicrotask(() => (callback as (error: Error) => void)(refusal));
    return undefined;
  };
  const release = () => undefined;
  // Once the request has ended the connection is the pool's again, maybe another request's: code that kept it does not close it.
  const end = (...args: unknown[]) => {
    const closed = guard.closedError();
    if (!closed) return target.end(...args);
    const callback = args[0];
    if (typeof callback !== 'function') return Promise.reject(closed);
    queueMicrotask(() => (callback as (error: Error) => void)(closed));
    return undefined;
  };
  const proxy = new Proxy(client, {
    get(object, key) {
      if (key === 'query') return query;
      if (key === 'release') return release;
      if (key === 'end') return end;
      const value = Reflect.get(object, key, object) as unknown;
      if (typeof value !== 'function') return value;
      let method = bound.get(key);
      if (method === undefined) bound.set(key, (method = value.bind(object)));
      return method;
    },
  });
  guardedClients.set(proxy, client);
  return proxy;
}

/** The client `client` guards, or `client` itself: what the module's own statements go to (the claim's driver). */
export function unguarded<Client>(client: Client): Client {
  return (guardedClients.get(client as object) as Client | undefined) ?? client;
}

function refusalOf(statement: unknown): StatementRefusedError | undefined {
  const effect = effectOf(statement);
  if (!effect || effect.kind === 'session') return undefined;
  if (effect.kind === 'refused') return new StatementRefusedError(effect.reason);
  return new StatementRefusedError(
    `${String(statementText(statement)).trim().slice(0, 40)} sent on the node-postgres client of an @Idempotent() request (a QueryRunner's connect() or databaseConnection, ` +
      `the pool's connect() or query()): that connection is the request's, and the statement would end or start the request's transaction. ` +
      `Send it through queryRunner.query(), or use startTransaction(), commitTransaction() and rollbackTransaction().`,
  );
}
