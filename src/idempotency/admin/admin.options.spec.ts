import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';
import { type IdempotencyAdminOptions, resolveAdminOptions } from './admin.options.js';

const guard = () => true;
const notCreated = () => Promise.reject(new Error('a guard function is never created'));
const resolve = (options: Partial<IdempotencyAdminOptions>) => resolveAdminOptions({ guard, scopes: 'all', ...options } as IdempotencyAdminOptions, notCreated);

describe('the admin options', () => {
  it('apply their defaults: 5 s per statement, one connection', async () => {
    expect(await resolve({})).toMatchObject({ statementTimeout: 5_000, connections: 1 });
  });

  it.each([
    ['scopes left out', { scopes: undefined }, /without `scopes`/],
    ['scopes as a list', { scopes: ['tenant:acme'] }, /without `scopes` \(got \["tenant:acme"\]\)/],
    ['scopes misspelled', { scopes: 'al' }, /without `scopes` \(got "al"\)/],
    ['no guard', { guard: undefined }, /without a guard/],
    ['a statementTimeout of 0', { statementTimeout: 0 }, /`statementTimeout` must be a positive integer, got 0/],
    ['a fractional statementTimeout', { statementTimeout: 1.5 }, /`statementTimeout` must be a positive integer/],
    ['a statementTimeout as text', { statementTimeout: '5000' }, /`statementTimeout` must be a positive integer, got "5000"/],
    ['no connections', { connections: 0 }, /`connections` must be a positive integer, got 0/],
  ])('refuse %s at startup, naming the fix', async (_case, options, message) => {
    const refused = resolve(options as Partial<IdempotencyAdminOptions>);
    await expect(refused).rejects.toThrow(IdempotencyConfigurationError);
    await expect(refused).rejects.toThrow(message);
  });

  it("take scopes as 'all' written out, or as a function of the request", async () => {
    expect(await (await resolve({ scopes: 'all' })).scopes({})).toBe('all');
    const scopes = (request: { tenant: string }) => [`tenant:${request.tenant}`];
    expect(await (await resolve({ scopes })).scopes({ tenant: 'acme' })).toEqual(['tenant:acme']);
  });
});
