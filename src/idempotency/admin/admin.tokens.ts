/** Injection token of the admin's options with their defaults applied. */
export const RESOLVED_ADMIN_OPTIONS = Symbol('idempotency:admin-resolved-options');

/** The controllers one `IdempotencyAdminModule.forRoot()` made for its path, for the OpenAPI documentation. */
export const ADMIN_CONTROLLERS = Symbol('idempotency:admin-controllers');
