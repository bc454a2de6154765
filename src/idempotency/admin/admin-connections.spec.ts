import { AdminProblemType, AdminRefusedException } from './admin.exceptions.js';
import { ConnectionBudget } from './admin-connections.js';

/** A piece of work that holds its connection until `finish()`. */
function held() {
  let finish!: () => void;
  const done = new Promise<void>((resolve) => (finish = resolve));
  return { work: () => done, finish };
}

describe('the admin connection budget', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('runs as many statements at once as it has connections, and the next one when one finishes', async () => {
    const budget = new ConnectionBudget(2, 1_000);
    const [a, b] = [held(), held()];
    const started: string[] = [];
    const run = (name: string, work: () => Promise<void>) => budget.run(async () => {
      started.push(name);
      await work();
    });
    const all = [run('a', a.work), run('b', b.work), run('c', async () => {})];
    await vi.advanceTimersByTimeAsync(0);
    expect(started).toEqual(['a', 'b']);
    a.finish();
    await vi.advanceTimersByTimeAsync(0);
    expect(started).toEqual(['a', 'b', 'c']);
    b.finish();
    await Promise.all(all);
  });

  it('refuses a statement that waited as long as one may run with admin-busy, and keeps the turns of the others', async () => {
    const budget = new ConnectionBudget(1, 1_000);
    const first = held();
    const running = budget.run(first.work);
    const refused = budget.run(async () => 'never').catch((error: unknown) => error);
    await vi.advanceTimersByTimeAsync(600);
    const later = budget.run(async () => 'later');
    await vi.advanceTimersByTimeAsync(400);
    const error = await refused;
    expect(error).toBeInstanceOf(AdminRefusedException);
    expect((error as AdminRefusedException).problem).toMatchObject({ type: AdminProblemType.Busy, status: 503 });
    first.finish();
    await running;
    await expect(later).resolves.toBe('later');
  });

  it('frees the connection of a statement that failed', async () => {
    const budget = new ConnectionBudget(1, 1_000);
    await expect(budget.run(() => Promise.reject(new Error('statement failed')))).rejects.toThrow('statement failed');
    await expect(budget.run(async () => 'next')).resolves.toBe('next');
  });
});
