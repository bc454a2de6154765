/** Injection token of the outbox options with their defaults applied. */
export const RESOLVED_OUTBOX_OPTIONS = Symbol('idempotency:outbox-resolved-options');
