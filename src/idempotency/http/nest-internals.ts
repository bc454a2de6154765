/**
 * The metadata keys of Nest's decorators that the module reads, by value.
 * Nest keeps them internal: Nest 12 exports them to its own packages through
 * `@nestjs/common/internal`, which Nest 10 and 11 do not have, while their
 * values are the same plain strings and enum numbers in 10, 11 and 12. The
 * module needs them to learn a route's method, path and `@HttpCode()`, and to
 * refuse routes whose response it cannot record (`@Res()`, `@Next()`,
 * `@Sse()`) or that interceptors wrap outside it (`@UseInterceptors()`).
 * nest-internals.spec.ts compares them with the installed Nest's own and
 * reads its decorators back through them, so a Nest release that changes one
 * breaks a test rather than an app.
 *
 * The two keys of `@nestjs/microservices` (an optional peer, so not imported)
 * name a message handler's pattern and kind (1 message, 2 event).
 */
export const PATH_METADATA = 'path';
export const METHOD_METADATA = 'method';
export const HTTP_CODE_METADATA = '__httpCode__';
export const INTERCEPTORS_METADATA = '__interceptors__';
export const ROUTE_ARGS_METADATA = '__routeArguments__';
export const RESPONSE_PASSTHROUGH_METADATA = '__responsePassthrough__';
export const SSE_METADATA = '__sse__';
export const VERSION_METADATA = '__version__';
export const RENDER_METADATA = '__renderTemplate__';
export const REDIRECT_METADATA = '__redirect__';
export const EXCEPTION_FILTERS_METADATA = '__exceptionFilters__';
export const FILTER_CATCH_EXCEPTIONS = '__filterCatchExceptions__';

/** The kinds of Nest's parameter decorators that hand a handler the response, as `ROUTE_ARGS_METADATA` numbers them. */
export const RouteParamtypes = { RESPONSE: 1, NEXT: 2 } as const;

export const MESSAGE_PATTERN_METADATA = 'microservices:pattern';
export const MESSAGE_HANDLER_TYPE_METADATA = 'microservices:handler_type';
