import fc from 'fast-check';
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
    const cache = new ReplayCache({ maxEntries: 10, maxBytes: 1 << 20 }, clocks);
    cache.set(id('k'), { fingerprint: 'f' }, outcome('a'), lifetime(60_000), cache.readClocks());
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
    const cache = new ReplayCache({ maxEntries: 10, maxBytes: 1 << 20 }, time.clocks);
    cache.set(id('k'), { fingerprint: 'f' }, outcome('a'), lifetime(60_000), cache.readClocks());
    time.advance(60_000 - CLOCK_SKEW_MARGIN_MS - 1);
    expect(cache.get(id('k'))).toBeDefined();
    time.advance(1);
    expect(cache.get(id('k'))).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('forgets a released key, and keeps out an outcome read before the release, or every entry when no key is named', () => {
    const time = fakeClocks();
    const cache = new ReplayCache({ maxEntries: 10, maxBytes: 1 << 20 }, time.clocks);
    cache.set(id('released'), { fingerprint: 'f' }, outcome('a'), lifetime(60_000), cache.readClocks());
    cache.set(id('kept'), { fingerprint: 'f' }, outcome('b'), lifetime(60_000), cache.readClocks());
    const readBefore = cache.readClocks(); // a request read the record, then the release committed
    time.advance(1);
    cache.forget(id('released'));
    expect(cache.get(id('released'))).toBeUndefined();
    expect(cache.get(id('kept'))).toBeDefined();
    cache.set(id('released'), { fingerprint: 'f' }, outcome('a'), lifetime(60_000), readBefore);
    expect(cache.get(id('released'))).toBeUndefined();
    time.advance(1);
    cache.set(id('released'), { fingerprint: 'g' }, outcome('c'), lifetime(60_000), cache.readClocks());
    expect(cache.get(id('released'))).toMatchObject({ fingerprint: 'g' });
    cache.forget();
    expect([cache.size, cache.bytes]).toEqual([0, 0]);
  });

  it('counts from the reading taken before the database was asked', () => {
    const time = fakeClocks();
    const cache = new ReplayCache({ maxEntries: 10, maxBytes: 1 << 20 }, time.clocks);
    const askedAt = cache.readClocks();
    time.advance(2_000); // the claim and the handler took this long
    cache.set(id('k'), { fingerprint: 'f' }, outcome('a'), lifetime(10_000), askedAt);
    time.advance(10_000 - CLOCK_SKEW_MARGIN_MS - 2_000);
    expect(cache.get(id('k'))).toBeUndefined();
  });

  it('drops an entry once either clock says so: a wall clock stepped back, or a monotonic clock paused', () => {
    const time = fakeClocks();
    const cache = new ReplayCache({ maxEntries: 10, maxBytes: 1 << 20 }, time.clocks);
    cache.set(id('stepped'), { fingerprint: 'f' }, outcome('a'), lifetime(60_000), cache.readClocks());
    cache.set(id('paused'), { fingerprint: 'f' }, outcome('a'), lifetime(60_000), cache.readClocks());
    time.now.wall -= HOUR;
    time.now.monotonic += 60_000;
    expect(cache.get(id('stepped'))).toBeUndefined();
    time.now.wall += HOUR + 60_000;
    time.now.monotonic -= 60_000;
    expect(cache.get(id('paused'))).toBeUndefined();
  });

  it('keeps nothing whose record has less than the margin left', () => {
    const cache = new ReplayCache({ maxEntries: 10, maxBytes: 1 << 20 }, fakeClocks().clocks);
    cache.set(id('k'), { fingerprint: 'f' }, outcome('a'), lifetime(CLOCK_SKEW_MARGIN_MS), cache.readClocks());
    expect(cache.size).toBe(0);
  });

  it('evicts the least recently used entry beyond its bound', () => {
    const cache = new ReplayCache({ maxEntries: 2, maxBytes: 1 << 20 }, fakeClocks().clocks);
    const set = (key: string) => cache.set(id(key), { fingerprint: 'f' }, outcome(key), lifetime(60_000), cache.readClocks());
    set('a');
    set('b');
    cache.get(id('a'));
    set('c');
    expect(cache.get(id('b'))).toBeUndefined();
    expect(cache.get(id('a'))).toBeDefined();
    expect(cache.get(id('c'))).toBeDefined();
  });

  describe('byte bound', () => {
    const utf8 = (text: string) => new TextEncoder().encode(text).length;
    /** What an entry counts, worked out independently of the cache. */
    const sizeOf = (key: string, body: string, headers: Record<string, string>) =>
      utf8(`tenant:a\0POST /orders\0${key}`) + utf8('f') + utf8(body) + Object.entries(headers).reduce((sum, [name, value]) => sum + utf8(name) + utf8(value), 0);

    it('counts UTF-8 bytes, not UTF-16 characters', () => {
      const body = 'é'.repeat(300); // 300 characters, 600 bytes
      const cache = new ReplayCache({ maxEntries: 10, maxBytes: sizeOf('k', body, {}) - 1 }, fakeClocks().clocks);
      cache.set(id('k'), { fingerprint: 'f' }, outcome(body), lifetime(60_000), cache.readClocks());
      expect(cache.size).toBe(0);
      const fits = new ReplayCache({ maxEntries: 10, maxBytes: sizeOf('k', body, {}) }, fakeClocks().clocks);
      fits.set(id('k'), { fingerprint: 'f' }, outcome(body), lifetime(60_000), fits.readClocks());
      expect(fits.bytes).toBe(sizeOf('k', body, {}));
    });

    it('keeps no body over 64 KiB in bytes, even under 64 Ki characters', () => {
      const cache = new ReplayCache({ maxEntries: 10, maxBytes: 1 << 20 }, fakeClocks().clocks);
      cache.set(id('k'), { fingerprint: 'f' }, outcome('€'.repeat(30_000)), lifetime(60_000), cache.readClocks()); // 90,000 bytes
      expect(cache.size).toBe(0);
    });

    it('evicts the least recently used entries until the bytes fit', () => {
      const body = 'x'.repeat(400);
      const cache = new ReplayCache({ maxEntries: 100, maxBytes: 2 * sizeOf('a', body, {}) + 10 }, fakeClocks().clocks);
      const set = (key: string) => cache.set(id(key), { fingerprint: 'f' }, outcome(body), lifetime(60_000), cache.readClocks());
      set('a');
      set('b');
      cache.get(id('a'));
      set('c');
      expect(cache.get(id('b'))).toBeUndefined();
      expect(cache.get(id('a'))).toBeDefined();
      expect(cache.get(id('c'))).toBeDefined();
    });

    it('never holds more than its bound, and counts exactly what it holds', () => {
      const entry = fc.record({
        key: fc.string({ minLength: 1, maxLength: 40 }),
        body: fc.oneof(fc.string({ maxLength: 3000, unit: 'grapheme' }), fc.string({ maxLength: 3000, unit: 'binary' })),
        headers: fc.dictionary(fc.constantFrom('location', 'content-type', 'etag'), fc.string({ maxLength: 80, unit: 'grapheme' })),
        touch: fc.boolean(),
      });
      fc.assert(
        fc.property(fc.integer({ min: 1, max: 20_000 }), fc.array(entry, { maxLength: 60 }), (maxBytes, entries) => {
          const cache = new ReplayCache({ maxEntries: 1000, maxBytes }, fakeClocks().clocks);
          const sizes = new Map<string, number>();
          for (const { key, body, headers, touch } of entries) {
            cache.set(id(key), { fingerprint: 'f' }, { status: 201, headers, body }, lifetime(60_000), cache.readClocks());
            sizes.set(key, sizeOf(key, body, headers));
            if (touch) cache.get(id(entries[0].key));
            expect(cache.bytes).toBeLessThanOrEqual(maxBytes);
          }
          const held = [...sizes.keys()].filter((key) => cache.get(id(key)) !== undefined);
          expect(held).toHaveLength(cache.size);
          expect(cache.bytes).toBe(held.reduce((sum, key) => sum + sizes.get(key)!, 0));
        }),
        { numRuns: 200 },
      );
    });
  });

  it('keeps nothing when sized 0, and no bodies over 64 KiB', () => {
    const { clocks } = fakeClocks();
    for (const limits of [{ maxEntries: 0, maxBytes: 1 << 20 }, { maxEntries: 10, maxBytes: 0 }]) {
      const off = new ReplayCache(limits, clocks);
      off.set(id('k'), { fingerprint: 'f' }, outcome('a'), lifetime(60_000), off.readClocks());
      expect(off.size).toBe(0);
    }
    const cache = new ReplayCache({ maxEntries: 10, maxBytes: 1 << 20 }, clocks);
    cache.set(id('big'), { fingerprint: 'f' }, outcome('x'.repeat(64 * 1024 + 1)), lifetime(60_000), cache.readClocks());
    expect(cache.size).toBe(0);
  });
});
