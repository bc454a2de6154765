import { andThen, settling } from './settling.js';

/** What an Observable delivered, in order, as the interceptor chain would see it. */
function record<T>(observable: ReturnType<typeof settling<T>>) {
  const seen: string[] = [];
  observable.subscribe({
    next: (value) => seen.push(`next ${String(value)}`),
    error: (error: Error) => seen.push(`error ${error.message}`),
    complete: () => seen.push('complete'),
  });
  return seen;
}

describe('settling', () => {
  it('emits a value settled at once before subscribe returns: a cache hit waits for no microtask', () => {
    expect(record(settling(() => 'replayed'))).toEqual(['next replayed', 'complete']);
  });

  it('emits a promised value once it resolves', async () => {
    const seen = record(settling(async () => 'executed'));
    expect(seen).toEqual([]);
    await Promise.resolve();
    expect(seen).toEqual(['next executed', 'complete']);
  });

  it('delivers a synchronous throw and a rejection as errors, for the exception filters', async () => {
    expect(
      record(
        settling(() => {
          throw new Error('key missing');
        }),
      ),
    ).toEqual(['error key missing']);
    const seen = record(settling(() => Promise.reject(new Error('rolled back'))));
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen).toEqual(['error rolled back']);
  });

  it('runs nothing until subscribed, as Nest subscribes once per request', () => {
    let runs = 0;
    const observable = settling(() => ++runs);
    expect(runs).toBe(0);
    record(observable);
    expect(runs).toBe(1);
  });
});

describe('andThen', () => {
  it('maps a value at once, and a promise once it fulfils', async () => {
    expect(andThen(2, (value) => value * 3)).toBe(6);
    const later = andThen(Promise.resolve(2), (value) => value * 3);
    expect(later).toBeInstanceOf(Promise);
    await expect(later).resolves.toBe(6);
  });
});
