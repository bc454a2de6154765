/**
 * The only file that reads Nest's metadata keys, which Nest exports for its
 * own packages through `@nestjs/common/internal` and not as public API. The
 * module needs them to learn a route's method, path and `@HttpCode()`, and to
 * refuse routes whose response it cannot record (`@Res()`, `@Next()`,
 * `@Sse()`) or that interceptors wrap outside it (`@UseInterceptors()`). A
 * Nest upgrade that renames them breaks here, at compile time.
 *
 * The two keys of `@nestjs/microservices` (an optional peer, so not imported)
 * name a message handler's pattern and kind (1 message, 2 event); the
 * message handler tests fail when they change.
 */
export {
  HTTP_CODE_METADATA,
  INTERCEPTORS_METADATA,
  METHOD_METADATA,
  PATH_METADATA,
  RESPONSE_PASSTHROUGH_METADATA,
  ROUTE_ARGS_METADATA,
  RouteParamtypes,
  SSE_METADATA,
} from '@nestjs/common/internal';
export const MESSAGE_PATTERN_METADATA = 'microservices:pattern';
export const MESSAGE_HANDLER_TYPE_METADATA = 'microservices:handler_type';
