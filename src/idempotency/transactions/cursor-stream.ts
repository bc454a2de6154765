import { Readable } from 'node:stream';

/** Rows per FETCH, and rows the stream buffers: pg-query-stream's defaults. */
const BATCH = 100;

/** Runs one statement of the stream's owner in the request's transaction; answers its rows. */
export type CursorQuery = (sql: string, parameters?: unknown[]) => Promise<unknown>;

/** What TypeORM passes to pg-query-stream besides the query: called when the stream ends, and when it fails. */
interface StreamCallbacks {
  onEnd?: () => void;
  onError?: (error: Error) => void;
}

/**
 * A stream of the rows of `sql`, read from a server-side cursor of the
 * request's transaction, a batch per FETCH.
 *
 * Why: TypeORM streams (`queryBuilder.stream()`, `queryRunner.stream()`)
 * read through pg-query-stream, which holds the connection until its last
 * row. Without the module the stream has a connection of its own; inside
 * the request it would have the request's, and a write awaited between two
 * rows would wait behind the stream, and the stream behind the code
 * awaiting the write, for good. Each FETCH here is a statement of its own,
 * so the handler's other statements go between them.
 *
 * The rows are those the stream would have given, in the same order, from
 * the snapshot the cursor's DECLARE takes, as pg-query-stream's query takes
 * one when it starts; `onEnd` and `onError` are called as TypeORM passes
 * them to pg-query-stream.
 */
export function cursorStream(query: CursorQuery, name: string, sql: string, parameters: unknown[] | undefined, { onEnd, onError }: StreamCallbacks = {}): Readable {
  let declared = false;
  let closed = false;
  const close = async () => {
    if (!declared || closed) return;
    closed = true;
    await query(`CLOSE ${name}`);
  };
  const stream = new Readable({
    objectMode: true,
    highWaterMark: BATCH,
    read() {
      void (async () => {
        if (!declared) {
          await query(`DECLARE ${name} NO SCROLL CURSOR FOR ${sql}`, parameters);
          declared = true;
        }
        const rows = (await query(`FETCH ${BATCH} FROM ${name}`)) as unknown[];
        if (rows.length < BATCH) await close();
        for (const row of rows) this.push(row);
        if (closed) this.push(null);
      })().catch((error: Error) => this.destroy(error));
    },
    destroy(error, callback) {
      // A stream given up on (a consumer that broke out of its loop) frees its cursor; one that outlived its transaction has none left.
      close()
        .catch(() => undefined)
        .finally(() => callback(error));
    },
  });
  if (onEnd) stream.on('end', onEnd);
  if (onError) stream.on('error', onError);
  return stream;
}
