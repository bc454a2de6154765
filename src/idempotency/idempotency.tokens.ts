/** Injection token of the module options with their defaults applied. */
export const RESOLVED_IDEMPOTENCY_OPTIONS = Symbol('idempotency:resolved-options');

/** Metadata key under which `@Idempotent()` keeps its route options. */
export const IDEMPOTENT_ROUTE = 'idempotency:route';
