import { Inject } from '@nestjs/common';

/** Injection token of the module options with their defaults applied. */
export const RESOLVED_IDEMPOTENCY_OPTIONS = Symbol('idempotency:resolved-options');

/**
 * Injects the module options as the module runs with them: every default
 * applied, resolved once at startup.
 *
 * @example
 * constructor(@InjectIdempotencyOptions() private readonly options: ResolvedIdempotencyOptions) {}
 * // options.retention, options.headerName, ...
 */
export const InjectIdempotencyOptions = (): PropertyDecorator & ParameterDecorator => Inject(RESOLVED_IDEMPOTENCY_OPTIONS);

/** Metadata key under which `@Idempotent()` keeps its route options. */
export const IDEMPOTENT_ROUTE = 'idempotency:route';

/** Metadata key under which `@SkipIdempotency()` marks a handler left out of a class-level `@Idempotent()`. */
export const SKIP_IDEMPOTENCY = 'idempotency:skip';
