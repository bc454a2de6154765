/** Injection token of the module options with their defaults applied. */
export const RESOLVED_IDEMPOTENCY_OPTIONS = Symbol('idempotency:resolved-options');

/** Metadata key under which `@Idempotent()` keeps its route options. */
export const IDEMPOTENT_ROUTE = 'idempotency:route';

/** Metadata key under which `@SkipIdempotency()` marks a handler left out of a class-level `@Idempotent()`. */
export const SKIP_IDEMPOTENCY = 'idempotency:skip';
