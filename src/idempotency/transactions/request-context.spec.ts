import { setImmediate as turn } from 'node:timers/promises';
import { ContextSlot } from './request-context.js';

describe('a context slot', () => {
  const request = new ContextSlot<string>('request');
  const unit = new ContextSlot<number>('unit');

  it('is inherited by work started inside run(), across awaits and timers, and is gone after it', async () => {
    const seen = await request.run('a', async () => {
      await turn();
      return new Promise<string | undefined>((resolve) => setTimeout(() => resolve(request.get()), 1));
    });
    expect(seen).toBe('a');
    expect(request.get()).toBeUndefined();
  });

  it('keeps the other slots as they are, as an AsyncLocalStorage of its own would', async () => {
    await request.run('a', () =>
      unit.run(1, async () => {
        expect([request.get(), unit.get()]).toEqual(['a', 1]);
        await unit.run(2, async () => expect([request.get(), unit.get()]).toEqual(['a', 2]));
        expect(unit.get()).toBe(1);
      }),
    );
  });

  it('run(undefined) leaves its own slot only, as exit() does', () => {
    request.run('a', () =>
      unit.run(1, () =>
        request.run(undefined, () => {
          expect(request.get()).toBeUndefined();
          expect(unit.get()).toBe(1);
        }),
      ),
    );
  });

  it('keeps concurrent work apart', async () => {
    const read = (value: string) => request.run(value, async () => (await turn(), request.get()));
    expect(await Promise.all([read('a'), read('b')])).toEqual(['a', 'b']);
  });

  it('tells two slots of the same description apart', () => {
    const other = new ContextSlot<string>('request');
    request.run('a', () => expect(other.get()).toBeUndefined());
  });
});
