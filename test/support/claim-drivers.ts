import type { IdempotencyModuleOptions } from '../../src/idempotency/index.js';
import { HTTP_ADAPTERS } from './http-app.js';
import type { LedgerDataSourceOptions } from './ledger-app.js';

/** A driver of the claim's transaction, with the connection it is meant for. */
export interface ClaimDriverRun {
  name: string;
  options: Partial<IdempotencyModuleOptions>;
  dataSource: LedgerDataSourceOptions;
}

/** Both drivers: the pg client's, pipelined (the demo's set-up), and TypeORM's public API. */
export const CLAIM_DRIVERS: readonly ClaimDriverRun[] = [
  { name: 'pg driver, pipelined', options: { claimDriver: 'pg' }, dataSource: { extra: { pipeline: true } } },
  { name: 'TypeORM driver', options: { claimDriver: 'typeorm' }, dataSource: {} },
];

/**
 * Each HTTP adapter with one driver, for a suite of the one-transaction flow
 * to run over both drivers at the cost of the adapters' run alone. `shift`
 * swaps the pairs, so that across two suites every adapter meets every
 * driver. (The other suites run the pg driver without pipelining.)
 */
export function adaptersWithDrivers(shift: 0 | 1): Array<[string, (typeof HTTP_ADAPTERS)[number], ClaimDriverRun]> {
  return HTTP_ADAPTERS.map((adapter, index) => {
    const driver = CLAIM_DRIVERS[(index + shift) % CLAIM_DRIVERS.length];
    return [`${adapter}, ${driver.name}`, adapter, driver];
  });
}
