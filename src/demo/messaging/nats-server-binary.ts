import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/**
 * The `nats-server` executable for tests, benches and chaos runs that start
 * NATS servers of their own: NATS_SERVER_BINARY, else the first
 * `nats-server` on PATH; undefined when there is none.
 */
export function natsServerBinary(): string | undefined {
  if (process.env.NATS_SERVER_BINARY) return process.env.NATS_SERVER_BINARY;
  for (const dir of (process.env.PATH ?? '').split(delimiter).filter(Boolean)) {
    const candidate = join(dir, 'nats-server');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}
