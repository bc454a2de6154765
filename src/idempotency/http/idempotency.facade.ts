import { Injectable } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { IdempotencyEvents } from '../events/idempotency-events.js';
import { FastReplay } from '../flow/fast-replay.js';
import { IdempotentRoutes } from './idempotent-route.js';
import { IdempotencyExtensions } from './idempotency-extensions.js';
import { OneTransactionFlow } from '../flow/one-transaction.flow.js';
import { ReplayCache } from '../flow/replay-cache.js';
import { RequestFingerprints } from '../fingerprint/request-fingerprints.js';

/**
 * Everything the interceptors bound by `@Idempotent()` work with, as one
 * provider. Nest builds an interceptor named in `@UseInterceptors()` in the
 * module of each controller that uses it, from what that module can see: the
 * module exports this one provider, and its flows, caches and readers stay
 * its own. Not part of the public API.
 */
@Injectable()
export class IdempotencyFacade {
  constructor(
    readonly routes: IdempotentRoutes,
    readonly extensions: IdempotencyExtensions,
    readonly fingerprints: RequestFingerprints,
    readonly cache: ReplayCache,
    readonly fast: FastReplay,
    readonly oneTransaction: OneTransactionFlow,
    readonly events: IdempotencyEvents,
    readonly adapterHost: HttpAdapterHost,
  ) {}
}
