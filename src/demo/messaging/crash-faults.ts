import { type CallHandler, type ExecutionContext, Injectable, type NestInterceptor } from '@nestjs/common';
import { writeSync } from 'node:fs';
import { type Observable, tap } from 'rxjs';
import type { OutboxMessage, OutboxPublisher } from '../../idempotency/outbox/index.js';

/**
 * Faults the chaos run injects into the demo's workers, at the two points
 * no transaction covers: after the broker acked a publish and before the
 * relay marked it sent, and after the consumer committed and before it
 * acked. Off unless FAULT_CRASH_AFTER_PUBLISH / FAULT_CRASH_AFTER_COMMIT
 * give a probability.
 */
export function crash(point: string): never {
  // Synchronous, so the line is out before the process is.
  writeSync(2, `fault: crash ${point}\n`);
  process.kill(process.pid, 'SIGKILL');
  throw new Error('unreachable');
}

/** Wraps a publisher: after an acked publish, the process dies with `probability`. */
export function crashingPublisher(inner: OutboxPublisher, probability: number): OutboxPublisher {
  if (!(probability > 0)) return inner;
  return {
    publish: async (message: OutboxMessage) => {
      await inner.publish(message);
      if (Math.random() < probability) crash('after publish');
    },
    close: () => inner.close?.() ?? Promise.resolve(),
  };
}

/** Around an idempotent message handler: after its commit, the process dies with the configured probability. */
@Injectable()
export class CrashAfterCommit implements NestInterceptor {
  private readonly probability = Number(process.env.FAULT_CRASH_AFTER_COMMIT ?? 0);

  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (!(this.probability > 0)) return next.handle();
    return next.handle().pipe(tap({ complete: () => Math.random() < this.probability && crash('after commit') }));
  }
}
