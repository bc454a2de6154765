import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { AbandonedClaimsCompleter } from './abandoned-claims.completer.js';
import { LeaseStore } from './lease.store.js';
import { OperationRegistry } from './operation-registry.js';
import { OperationRunner } from './operation.runner.js';
import { PhasedFlow } from './phased-flow.js';

/**
 * Phased operations for external side effects: serves
 * `@Idempotent({ phases: true })` routes (the claim under a lease, the
 * operation's phases, recovery after a crash), and finishes abandoned
 * claims in every reaper pass. Import it once, beside `IdempotencyModule`,
 * in every instance that serves phased routes or reaps; without it, a
 * phased route fails the boot.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [LeaseStore, OperationRegistry, OperationRunner, PhasedFlow, AbandonedClaimsCompleter],
})
export class IdempotencyPhasesModule {}
