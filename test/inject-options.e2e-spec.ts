import { Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { InjectIdempotencyOptions, type ResolvedIdempotencyOptions } from '../src/idempotency/index.js';
import { ledgerAppModules } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

@Injectable()
class RetryAdvice {
  constructor(@InjectIdempotencyOptions() readonly options: ResolvedIdempotencyOptions) {}
}

describe('@InjectIdempotencyOptions()', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('injects the options the module runs with: those given, and the defaults of the rest', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: ledgerAppModules(db.url, { headerName: 'X-Request-Key', reaper: false }),
      providers: [RetryAdvice],
    }).compile();
    try {
      const { options } = moduleRef.get(RetryAdvice);
      expect(options.headerName).toBe('X-Request-Key');
      expect(options.retention).toBe(24 * 60 * 60 * 1000);
      expect(options.reaper.enabled).toBe(false);
    } finally {
      await moduleRef.close();
    }
  });
});
