import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { Logger } from 'typeorm';
import { dataSourceOptions } from '../src/demo/database/data-source-options.js';
import { IdempotencyModule, IdempotencyReaper } from '../src/idempotency/index.js';

/** Records the text of every statement its DataSource sends. */
class StatementLog implements Logger {
  readonly statements: string[] = [];
  logQuery(query: string): void {
    this.statements.push(query);
  }
  logQueryError(): void {}
  logQuerySlow(): void {}
  logSchemaBuild(): void {}
  logMigration(): void {}
  log(): void {}
}

/**
 * The reaper's batch statement as the module sends it: caught by a TypeORM
 * logger while the public `IdempotencyReaper.reap(now)` runs one pass with
 * `now` at the epoch, which deletes nothing. The bench then explains it
 * instead of keeping a copy of the module's SQL.
 */
export async function reaperStatement(url: string): Promise<string> {
  const log = new StatementLog();
  @Module({
    imports: [
      TypeOrmModule.forRoot({ ...dataSourceOptions(url), migrationsRun: false, logging: ['query'], logger: log }),
      IdempotencyModule.forRoot({ tenant: 'shared', reaper: false }),
    ],
  })
  class ReaperStatementModule {}
  const app = await NestFactory.createApplicationContext(ReaperStatementModule, { logger: ['error'] });
  try {
    await app.get(IdempotencyReaper).reap(new Date(0));
  } finally {
    await app.close();
  }
  const statement = log.statements.find((text) => /DELETE FROM "[^"]+"\.idempotency_records/i.test(text));
  if (!statement) throw new Error('no DELETE from idempotency_records among the statements of a reaper pass');
  return statement;
}
