import { InvalidArgumentError } from 'commander';
import { MAX_RETENTION_MS, parseInstant, parseRetention } from './cli-arguments.js';

describe('parseRetention', () => {
  it.each([
    ['1', 1],
    ['86400000', 86_400_000],
    [String(MAX_RETENTION_MS), MAX_RETENTION_MS],
  ])('takes %s ms', (given, ms) => {
    expect(parseRetention(given)).toBe(ms);
  });

  it.each([
    ['not a number', 'abc'],
    ['an already expired failure', '-1'],
    ['zero', '0'],
    ['a key blocked for millennia', '1e15'],
    ['a day past the maximum', String(MAX_RETENTION_MS + 86_400_000)],
    ['a fraction', '1.5'],
    ['nothing', ''],
  ])('refuses %s as a usage error', (_, given) => {
    expect(() => parseRetention(given)).toThrow(InvalidArgumentError);
  });
});

describe('parseInstant', () => {
  it.each([
    ['a zone', '2025-06-01T12:00:00Z', '2025-06-01T12:00:00.000Z'],
    ['an offset', '2025-06-01T12:00:00+09:00', '2025-06-01T03:00:00.000Z'],
    ['an offset without a colon', '2025-06-01T12:00:00-0230', '2025-06-01T14:30:00.000Z'],
    ["psql's form", '2025-06-01 12:00:00.123456+00', '2025-06-01T12:00:00.123Z'],
    ['no zone, as UTC', '2025-06-01T12:00:00', '2025-06-01T12:00:00.000Z'],
    ['minutes only, as UTC', '2025-06-01T12:00', '2025-06-01T12:00:00.000Z'],
    ['a date, as midnight UTC', '2025-06-01', '2025-06-01T00:00:00.000Z'],
    ['a leap day', '2024-02-29T23:59:59.999z', '2024-02-29T23:59:59.999Z'],
    ['a year before 100', '0099-01-01T00:00:00Z', '0099-01-01T00:00:00.000Z'],
  ])('reads %s', (_, given, iso) => {
    expect(parseInstant(given).toISOString()).toBe(iso);
  });

  it.each([
    ['words Date would read in local time', 'June 1 2025 12:00'],
    ['a year alone', '2025'],
    ['a day the month lacks', '2025-02-30'],
    ['an hour past 23', '2025-06-01T24:00:00Z'],
    ['an offset past 23 hours', '2025-06-01T12:00:00+24:00'],
    ['a number', '1748779200000'],
    ['nothing', ''],
  ])('refuses %s as a usage error', (_, given) => {
    expect(() => parseInstant(given)).toThrow(InvalidArgumentError);
  });
});
