import pg from 'pg';

/** What requests sent, per request. */
export interface CountedStatements {
  /** SQL statements, a multi-statement string counted statement by statement. */
  statements: number;
  /** Queries node-postgres sent: a multi-statement string is one (one message, one answer). */
  queries: number;
  /**
   * Times a connection sent something while waiting for no answer: on a
   * pipelined connection, statements sent while others are in flight ride
   * in their round trip; without pipelining node-postgres sends each query
   * after the last one's answer, so each is a round trip.
   */
  roundTrips: number;
  /** Statements by their first keyword (`START`, `SAVEPOINT`, `INSERT`, `WITH`…). */
  byKind: Record<string, number>;
}

type Query = (...args: unknown[]) => unknown;
type CountedClient = pg.Client & { pipeline?: boolean; inFlight?: number };

/**
 * Counts at node-postgres's `Client.prototype.query`, which every path of
 * TypeORM's and the module's goes through, in this process.
 */
export class StatementCounter {
  private statements = 0;
  private queries = 0;
  private roundTrips = 0;
  private byKind: Record<string, number> = {};

  private constructor() {}

  static install(): StatementCounter {
    const counter = new StatementCounter();
    const prototype = pg.Client.prototype as unknown as { query: Query };
    const query = prototype.query;
    prototype.query = function (this: CountedClient, ...args: unknown[]) {
      counter.count(this, args[0]);
      this.inFlight = (this.inFlight ?? 0) + 1;
      const done = () => {
        this.inFlight!--;
      };
      // A query built beforehand (the module's named statements, pg's Query) answers through its own callback.
      const built = args[0] as { submit?: unknown; callback?: (...results: unknown[]) => void } | undefined;
      if (typeof built?.submit === 'function' && typeof built.callback === 'function') {
        const given = built.callback;
        built.callback = (...results: unknown[]) => {
          done();
          given(...results);
        };
        return query.apply(this, args);
      }
      const callback = args.findIndex((arg) => typeof arg === 'function');
      if (callback >= 0) {
        const given = args[callback] as (...results: unknown[]) => void;
        args[callback] = (...results: unknown[]) => {
          done();
          given(...results);
        };
        return query.apply(this, args);
      }
      const sent = query.apply(this, args) as Promise<unknown> | undefined;
      if (sent && typeof sent.then === 'function') sent.then(done, done);
      return sent;
    };
    return counter;
  }

  reset(): void {
    this.statements = 0;
    this.queries = 0;
    this.roundTrips = 0;
    this.byKind = {};
  }

  perRequest(requests: number): CountedStatements {
    const byKind = Object.fromEntries(Object.entries(this.byKind).map(([kind, count]) => [kind, count / requests]));
    return { statements: this.statements / requests, queries: this.queries / requests, roundTrips: this.roundTrips / requests, byKind };
  }

  private count(client: CountedClient, config: unknown): void {
    const text = typeof config === 'string' ? config : (config as { text?: string } | undefined)?.text;
    if (typeof text !== 'string') return;
    this.queries++;
    if (!client.pipeline || !client.inFlight) this.roundTrips++;
    for (const statement of text.split(';').map((part) => part.trim()).filter(Boolean)) {
      this.statements++;
      const kind = statement.split(/\s/, 1)[0].toUpperCase();
      this.byKind[kind] = (this.byKind[kind] ?? 0) + 1;
    }
  }
}
