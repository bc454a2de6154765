/**
 * A Nest app of one route, in a process of its own, so that a test can kill
 * it with SIGKILL between a QueryRunner's commitTransaction() and the
 * request's answer (test/faithful-transaction/crash.e2e-spec.ts). It loads
 * the package as `npm pack` packs it (the ES build), and runs on the TypeORM
 * the process resolves (`typeorm-0.3.hooks.mjs` sends it to 0.3).
 *
 * DATABASE_URL: the suite's database, with a table textbook_orders.
 */
import 'reflect-metadata';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Column, DataSource, Entity, PrimaryGeneratedColumn } from 'typeorm';

const lib: typeof import('../../src/idempotency/index.js') = await import(pathToFileURL(resolve('dist/lib/esm/index.js')).href);

@Entity({ name: 'textbook_orders' })
class OrderRow {
  @PrimaryGeneratedColumn()
  id: number;

  @Column('text')
  label: string;

  @Column('text')
  part: string;
}

/** docs.nestjs.com/techniques/database, "Transactions": the QueryRunner example, as printed there. */
async function createMany(dataSource: DataSource, users: OrderRow[]) {
  const queryRunner = dataSource.createQueryRunner();

  await queryRunner.connect();
  await queryRunner.startTransaction();
  try {
    await queryRunner.manager.save(users[0]);
    await queryRunner.manager.save(users[1]);

    await queryRunner.commitTransaction();
  } catch (err) {
    // since we have errors lets rollback the changes we made
    await queryRunner.rollbackTransaction();
  } finally {
    // you need to release a queryRunner which was manually instantiated
    await queryRunner.release();
  }
}

interface PlaceOrder {
  label: string;
  /** Stops for good once the QueryRunner has committed, saying so on stdout: the test kills the process there. */
  hang?: boolean;
}

@Controller('orders')
class OrdersController {
  constructor(private readonly dataSource: DataSource) {}

  @Post('with')
  @lib.Idempotent()
  withModule(@Body() body: PlaceOrder) {
    return this.place(body);
  }

  @Post('without')
  withoutModule(@Body() body: PlaceOrder) {
    return this.place(body);
  }

  private async place({ label, hang }: PlaceOrder) {
    const part = (name: string) => Object.assign(new OrderRow(), { label, part: name });
    await createMany(this.dataSource, [part('order'), part('line')]);
    if (hang) {
      process.stdout.write(`committed ${label}\n`);
      await new Promise(() => undefined);
    }
    return { label };
  }
}

@Module({
  imports: [
    TypeOrmModule.forRoot({ type: 'postgres', url: process.env.DATABASE_URL, entities: [lib.IdempotencyRecord, OrderRow], migrations: lib.idempotencyMigrations, migrationsRun: true }),
    TypeOrmModule.forFeature([OrderRow]),
    lib.IdempotencyModule.forRoot({ tenant: 'shared' }),
  ],
  controllers: [OrdersController],
})
class TextbookModule {}

const app = await NestFactory.create(TextbookModule, { logger: ['error'] });
await app.listen(0, '127.0.0.1');
// 1.x dropped the DataSource's deprecated connect(): the suite checks which TypeORM this process runs on.
process.stdout.write(`listening on ${await app.getUrl()} on TypeORM ${'connect' in DataSource.prototype ? '0.3' : '1.x'}\n`);
