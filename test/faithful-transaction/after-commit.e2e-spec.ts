import { Injectable, Module } from '@nestjs/common';
import { CommandBus, CommandHandler, CqrsModule, EventBus, EventsHandler, type ICommandHandler, type IEventHandler, ofType, Saga } from '@nestjs/cqrs';
import { setTimeout as sleep } from 'node:timers/promises';
import { map, type Observable } from 'rxjs';
import { DataSource } from 'typeorm';
import { countRows, eventually, FAITHFUL_ROWS_SCHEMA, type FaithfulApp, type HandlerContext, send, startFaithfulApp, type Twin, TWINS, uniqueLabel } from '../support/faithful-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

class PlaceOrder {
  constructor(readonly label: string) {}
}
class OrderPlaced {
  constructor(readonly label: string) {}
}
class ShipOrder {
  constructor(readonly label: string) {}
}

/** What became of the writes that outlive the request, by label: `'written'` or the error they met. */
const outcomes = new Map<string, unknown[]>();
const settle = async (label: string, write: () => Promise<unknown>) => {
  try {
    await write();
    outcomes.set(label, [...(outcomes.get(label) ?? []), 'written']);
  } catch (error) {
    outcomes.set(label, [...(outcomes.get(label) ?? []), error]);
  }
};
const insert = (dataSource: DataSource, label: string, step: string) => dataSource.query(`INSERT INTO faithful_rows (label, step) VALUES ($1, $2)`, [label, step]);

/** Writes the order and publishes that it was placed, as a command handler of @nestjs/cqrs's documentation does. */
@CommandHandler(PlaceOrder)
class PlaceOrderHandler implements ICommandHandler<PlaceOrder> {
  constructor(
    private readonly dataSource: DataSource,
    private readonly events: EventBus,
  ) {}

  async execute({ label }: PlaceOrder) {
    await insert(this.dataSource, label, 'order');
    this.events.publish(new OrderPlaced(label));
  }
}

/** A saga: an order placed becomes a shipment, a command of its own. */
@Injectable()
class OrderSagas {
  @Saga()
  placed = (events$: Observable<any>) => events$.pipe(ofType(OrderPlaced), map(({ label }) => new ShipOrder(label)));
}

/** Writes the shipment a while later: by then the request that placed the order has ended. */
@CommandHandler(ShipOrder)
class ShipOrderHandler implements ICommandHandler<ShipOrder> {
  constructor(private readonly dataSource: DataSource) {}

  async execute({ label }: ShipOrder) {
    await sleep(150);
    await settle(label, () => insert(this.dataSource, label, 'shipment'));
  }
}

/** An event handler that writes a while later too. */
@EventsHandler(OrderPlaced)
class NotifyOnOrderPlaced implements IEventHandler<OrderPlaced> {
  constructor(private readonly dataSource: DataSource) {}

  handle({ label }: OrderPlaced) {
    void sleep(100).then(() => settle(label, () => insert(this.dataSource, label, 'notification')));
  }
}

@Module({ imports: [CqrsModule.forRoot()], providers: [PlaceOrderHandler, ShipOrderHandler, NotifyOnOrderPlaced, OrderSagas] })
class OrdersModule {}

/** Places the order through the command bus, then fails if asked. */
async function placeOrder({ get }: HandlerContext, { label, fail }: { label: string; fail?: boolean }) {
  await get(CommandBus).execute(new PlaceOrder(label));
  if (fail) throw new Error('failed after placing the order');
  return { label };
}

/** Starts a timer whose write comes once the request has answered. */
async function writeLater({ dataSource }: HandlerContext, { label, fail }: { label: string; fail?: boolean }) {
  setTimeout(() => void settle(label, () => insert(dataSource, label, 'later')), 100);
  if (fail) throw new Error('failed after starting the timer');
  return { label };
}

/**
 * Item 6 of issue 40: work that outlives the handler (a saga, an event
 * handler, a timer) runs on connections of its own once the request has
 * committed, as without the module; once it rolled back, it throws
 * `TransactionClosedError`, so that a failed request keeps nothing. Each
 * route runs twice, with `@Idempotent()` and without, through the packed
 * ES build.
 */
describe('work that outlives the handler', () => {
  let db: TestDatabase;
  let app: FaithfulApp;
  const rows = (label: string) => countRows(db, 'faithful_rows', 'label = $1', [label]);
  const labels = (name: string): Record<Twin, string> => ({ with: uniqueLabel(`${name}-with`), without: uniqueLabel(`${name}-without`) });

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(FAITHFUL_ROWS_SCHEMA);
    app = await startFaithfulApp({
      db,
      imports: [OrdersModule],
      routes: [
        { path: 'cqrs', handle: placeOrder },
        { path: 'timer', handle: writeLater },
      ],
    });
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('commits what a saga and an event handler write after the request committed, as without the module', async () => {
    const label = labels('cqrs');
    const answers = await Promise.all(TWINS.map((twin) => send(app, 'cqrs', twin, { label: label[twin] })));
    expect(answers.map((answer) => answer.status)).toEqual([201, 201]);
    expect(await eventually(() => TWINS.every((twin) => outcomes.get(label[twin])?.length === 2), 3000), 'the late writes settled').toBe(true);
    expect(outcomes.get(label.with)).toEqual(['written', 'written']);
    expect([await rows(label.with), await rows(label.without)]).toEqual([3, 3]);
  });

  it('commits what a timer started in the request writes after it committed', async () => {
    const label = labels('timer');
    const answers = await Promise.all(TWINS.map((twin) => send(app, 'timer', twin, { label: label[twin] })));
    expect(answers.map((answer) => answer.status)).toEqual([201, 201]);
    expect(await eventually(() => TWINS.every((twin) => outcomes.has(label[twin])), 2000), 'the late writes settled').toBe(true);
    expect([await rows(label.with), await rows(label.without)]).toEqual([1, 1]);
  });

  it.each(['cqrs', 'timer'])('keeps nothing of a request that rolled back: what its %s writes later throws TransactionClosedError', async (path) => {
    const label = uniqueLabel(`${path}-failed`);
    expect((await send(app, path, 'with', { label, fail: true })).status).toBe(500);
    const late = path === 'cqrs' ? 2 : 1;
    expect(await eventually(() => outcomes.get(label)?.length === late, 3000), 'the late writes settled').toBe(true);
    for (const outcome of outcomes.get(label)!) expect((outcome as Error).name).toBe('TransactionClosedError');
    expect(await rows(label)).toBe(0);
  });
});
