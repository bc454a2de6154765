import { getDataSourceToken } from '@nestjs/typeorm';
import { dataSourceTokenOf } from './idempotency-data-source.js';

describe('the DataSource token of a connection name (contract with @nestjs/typeorm)', () => {
  it.each(['default', 'main', 'read-replica'])('is getDataSourceToken(%j)', (name) => {
    expect(dataSourceTokenOf(name)).toBe(getDataSourceToken(name));
  });
});
