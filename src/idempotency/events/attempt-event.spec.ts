import { IdempotencyKeyReusedException } from '../errors/idempotency.exceptions.js';
import { NO_STEPS } from '../outcome/recorded-outcome.js';
import { attemptEvent, HTTP_ERRORS } from './attempt-event.js';
import { hashKey } from './idempotency-events.js';

describe('attemptEvent', () => {
  const id = { scope: 'acme', operation: 'POST /orders', key: 'k-1' };
  const replayed = { steps: NO_STEPS, settled: { outcome: { status: 201, headers: {}, body: '{}' }, replayed: true } };

  it('carries the key hash that other events of the same key carry', () => {
    const event = attemptEvent({ operation: id.operation, id }, replayed, undefined, HTTP_ERRORS);
    expect(event.keyHash).toBe(hashKey(id));
    // Tracing and the log pair an attempt with a commit failure by it.
    expect(event).toEqual({ kind: 'attempt', operation: id.operation, outcome: 'replayed', status: 201, collided: false, keyHash: hashKey(id) });
  });

  it('has no key hash where the request had no usable key', () => {
    const event = attemptEvent({ operation: id.operation }, { steps: NO_STEPS, error: new IdempotencyKeyReusedException() }, new IdempotencyKeyReusedException(), HTTP_ERRORS);
    expect('keyHash' in event).toBe(false);
    expect(event).toMatchObject({ outcome: 'key_reused', status: 422 });
  });
});
