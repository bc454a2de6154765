import { CLOCK_SKEW_MARGIN_MS, ReplayCache } from './replay-cache.js';

const outcome = (body: string) => ({ status: 201, headers: {}, body });
const id = (key: string, scope = 'tenant:a') => ({ scope, operation: 'POST /orders', key });
const NOW = 1_000_000_000;
const later = new Date(NOW + 60_000);

describe('ReplayCache', () => {
  it('returns an entry by its full scope, operation and key', () => {
    const cache = new ReplayCache(10);
    cache.set(id('k'), 'f', outcome('a'), later);
    expect(cache.get(id('k'), NOW)).toEqual({ fingerprint: 'f', outcome: outcome('a'), expiresAt: later.getTime() });
    expect(cache.get(id('k', 'tenant:b'), NOW)).toBeUndefined();
    expect(cache.get({ ...id('k'), operation: 'POST /refunds' }, NOW)).toBeUndefined();
  });

  it('drops an entry before the record expires, by the clock-skew margin', () => {
    const cache = new ReplayCache(10);
    cache.set(id('k'), 'f', outcome('a'), later);
    expect(cache.get(id('k'), later.getTime() - CLOCK_SKEW_MARGIN_MS - 1)).toBeDefined();
    expect(cache.get(id('k'), later.getTime() - CLOCK_SKEW_MARGIN_MS)).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('evicts the least recently used entry beyond its bound', () => {
    const cache = new ReplayCache(2);
    cache.set(id('a'), 'f', outcome('a'), later);
    cache.set(id('b'), 'f', outcome('b'), later);
    cache.get(id('a'), NOW);
    cache.set(id('c'), 'f', outcome('c'), later);
    expect(cache.get(id('b'), NOW)).toBeUndefined();
    expect(cache.get(id('a'), NOW)).toBeDefined();
    expect(cache.get(id('c'), NOW)).toBeDefined();
  });

  it('keeps nothing when sized 0, and no bodies over 64 KiB', () => {
    const off = new ReplayCache(0);
    off.set(id('k'), 'f', outcome('a'), later);
    expect(off.size).toBe(0);
    const cache = new ReplayCache(10);
    cache.set(id('big'), 'f', outcome('x'.repeat(64 * 1024 + 1)), later);
    expect(cache.size).toBe(0);
  });
});
