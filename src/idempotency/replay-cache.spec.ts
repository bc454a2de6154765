import { CLOCK_SKEW_MARGIN_MS, type ClockReading, ReplayCache } from './replay-cache.js';

const outcome = (body: string) => ({ status: 201, headers: {}, body });
const id = (key: string, scope = 'tenant:a') => ({ scope, operation: 'POST /orders', key });
const HOUR = 3_600_000;
/** The database's clock. */
const DB_NOW = new Date('2026-01-01T12:00:00Z');
const lifetime = (leftMs: number) => ({ expiresAt: new Date(DB_NOW.getTime() + leftMs), databaseNow: DB_NOW });

/** Process clocks a test moves by hand; the wall clock starts `skewMs` off the database's. */
function fakeClocks(skewMs = 0) {
  const now: ClockReading = { wall: DB_NOW.getTime() + skewMs, monotonic: 1_000 };
  return {
    now,
    clocks: { wall: () => now.wall, monotonic: () => now.monotonic },
    advance(ms: number) {
      now.wall += ms;
      now.monotonic += ms;
    },
  };
}

describe('ReplayCache', () => {
  it('returns an entry by its full scope, operation and key', () => {
    const { clocks } = fakeClocks();
    const cache = new ReplayCache(10, clocks);
    cache.set(id('k'), 'f', outcome('a'), lifetime(60_000), cache.readClocks());
    expect(cache.get(id('k'))).toMatchObject({ fingerprint: 'f', outcome: outcome('a') });
    expect(cache.get(id('k', 'tenant:b'))).toBeUndefined();
    expect(cache.get({ ...id('k'), operation: 'POST /refunds' })).toBeUndefined();
  });

  it.each([
    ['on time', 0],
    ['an hour ahead', HOUR],
    ['an hour behind', -HOUR],
  ])('keeps an entry for the time its record had left on the database’s clock, less the margin, with a process clock %s', (_case, skewMs) => {
    const time = fakeClocks(skewMs);
    const cache = new ReplayCache(10, time.clocks);
    cache.set(id('k'), 'f', outcome('a'), lifetime(60_000), cache.readClocks());
    time.advance(60_000 - CLOCK_SKEW_MARGIN_MS - 1);
    expect(cache.get(id('k'))).toBeDefined();
    time.advance(1);
    expect(cache.get(id('k'))).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('counts from the reading taken before the database was asked', () => {
    const time = fakeClocks();
    const cache = new ReplayCache(10, time.clocks);
    const askedAt = cache.readClocks();
    time.advance(2_000); // the claim and the handler took this long
    cache.set(id('k'), 'f', outcome('a'), lifetime(10_000), askedAt);
    time.advance(10_000 - CLOCK_SKEW_MARGIN_MS - 2_000);
    expect(cache.get(id('k'))).toBeUndefined();
  });

  it('drops an entry once either clock says so: a wall clock stepped back, or a monotonic clock paused', () => {
    const time = fakeClocks();
    const cache = new ReplayCache(10, time.clocks);
    cache.set(id('stepped'), 'f', outcome('a'), lifetime(60_000), cache.readClocks());
    cache.set(id('paused'), 'f', outcome('a'), lifetime(60_000), cache.readClocks());
    time.now.wall -= HOUR;
    time.now.monotonic += 60_000;
    expect(cache.get(id('stepped'))).toBeUndefined();
    time.now.wall += HOUR + 60_000;
    time.now.monotonic -= 60_000;
    expect(cache.get(id('paused'))).toBeUndefined();
  });

  it('keeps nothing whose record has less than the margin left', () => {
    const cache = new ReplayCache(10, fakeClocks().clocks);
    cache.set(id('k'), 'f', outcome('a'), lifetime(CLOCK_SKEW_MARGIN_MS), cache.readClocks());
    expect(cache.size).toBe(0);
  });

  it('evicts the least recently used entry beyond its bound', () => {
    const cache = new ReplayCache(2, fakeClocks().clocks);
    const set = (key: string) => cache.set(id(key), 'f', outcome(key), lifetime(60_000), cache.readClocks());
    set('a');
    set('b');
    cache.get(id('a'));
    set('c');
    expect(cache.get(id('b'))).toBeUndefined();
    expect(cache.get(id('a'))).toBeDefined();
    expect(cache.get(id('c'))).toBeDefined();
  });

  it('keeps nothing when sized 0, and no bodies over 64 KiB', () => {
    const { clocks } = fakeClocks();
    const off = new ReplayCache(0, clocks);
    off.set(id('k'), 'f', outcome('a'), lifetime(60_000), off.readClocks());
    expect(off.size).toBe(0);
    const cache = new ReplayCache(10, clocks);
    cache.set(id('big'), 'f', outcome('x'.repeat(64 * 1024 + 1)), lifetime(60_000), cache.readClocks());
    expect(cache.size).toBe(0);
  });
});
