import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { ApplicationConfig, DiscoveryService, MetadataScanner } from '@nestjs/core';
import { type IdempotentRoute, IdempotentRoutes } from '../http/idempotent-route.js';
import { IdempotencyExtensions, unservedMessage } from '../http/idempotency-extensions.js';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';
import type { ResolvedModuleOptions } from '../options/idempotency.options.js';
import { IDEMPOTENT_ROUTE, RESOLVED_IDEMPOTENCY_OPTIONS } from '../options/idempotency.tokens.js';
import { globalInterceptors, type InterceptorAround, isKnownReshaper, isVouchedFor, nameOf, routeInterceptorsAround } from './interceptors-around.js';
import { IdempotencyFilter } from '../http/idempotency.filter.js';
import {
  EXCEPTION_FILTERS_METADATA,
  FILTER_CATCH_EXCEPTIONS,
  MESSAGE_PATTERN_METADATA,
  PATH_METADATA,
  REDIRECT_METADATA,
  RENDER_METADATA,
  RESPONSE_PASSTHROUGH_METADATA,
  ROUTE_ARGS_METADATA,
  RouteParamtypes,
  SSE_METADATA,
} from '../http/nest-internals.js';
import { RecordedOutcomeResponse } from '../outcome/recorded-outcome.js';

/**
 * Checks every `@Idempotent()` route at startup, so that a route whose
 * outcome cannot be recorded, or whose replays could differ from its first
 * answer, fails the boot instead of a request.
 */
@Injectable()
export class IdempotentRoutesValidator implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly routes: IdempotentRoutes,
    private readonly config: ApplicationConfig,
    private readonly extensions: IdempotencyExtensions,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  // Runs in init(), after Nest registered the routes with their interceptors.
  onModuleInit(): void {
    const operations: string[] = [];
    const handlersOf = new Map<string, { handler: string; derived: boolean }>();
    const around: Around[] = [];
    for (const wrapper of this.discovery.getControllers()) {
      const controller = wrapper.metatype as Function | null;
      if (!controller?.prototype) continue;
      for (const name of this.scanner.getAllMethodNames(controller.prototype)) {
        const handler = controller.prototype[name];
        const route = this.routes.of(controller, handler);
        if (!route) continue;
        operations.push(route.operation);
        // HTTP routes: a message handler's operation is its pattern, and its errors are the transport's.
        if (Reflect.getMetadata(PATH_METADATA, handler) !== undefined) {
          checkOperationIsOwn(`${controller.name}.${name}`, route, handlersOf);
          checkNoFilterCatchesFirst(controller, name, handler);
        } else if (Reflect.getMetadata(MESSAGE_PATTERN_METADATA, handler) !== undefined && !this.extensions.serves('rpc')) {
          throw new IdempotencyConfigurationError(unservedMessage('rpc', `${controller.name}.${name}`));
        }
        if (route.lease !== undefined && !this.extensions.serves('phases')) throw new IdempotencyConfigurationError(unservedMessage('phases', `${controller.name}.${name}`));
        this.checkResponseIsRecordable(controller, name, handler, route.lease !== undefined);
        around.push(...routeInterceptorsAround(controller, handler).map((outer) => ({ ...outer, handler: `${controller.name}.${name}`, controller: controller.name })));
      }
    }
    this.refuseUnservedResolvers();
    if (operations.length === 0) return;
    const wrapped = operations.length === 1 ? operations[0] : `${operations[0]} and ${operations.length - 1} more @Idempotent() routes`;
    around.push(...globalInterceptors(this.config).map((outer) => ({ ...outer, handler: wrapped, controller: wrapped })));
    const unvouched = around.filter((outer) => !isVouchedFor(outer.interceptor, this.options.allowInterceptorsAround));
    // A serializer around the module gets the recorded text, not the handler's object, so the fields it
    // would strip are sent: refuse. Any other interceptor sees the same text the first time and on every
    // replay; the module cannot tell whether it reshapes it, so it says so once and starts.
    const reshapers = unvouched.filter((outer) => isKnownReshaper(outer.interceptor));
    if (reshapers.length > 0) throw new IdempotencyConfigurationError(interceptorsAroundMessage(reshapers));
    const others = unvouched.filter((outer) => !isKnownReshaper(outer.interceptor));
    if (others.length > 0) this.logger.warn(interceptorsAroundWarning(others));
  }

  private readonly logger = new Logger('Idempotency');

  /** `@Idempotent()` on a provider's methods (a GraphQL resolver's), which only IdempotencyGraphqlModule serves. */
  private refuseUnservedResolvers(): void {
    if (this.extensions.serves('graphql')) return;
    for (const wrapper of this.discovery.getProviders()) {
      const provider = wrapper.metatype as Function | null;
      if (typeof provider !== 'function' || !provider.prototype) continue;
      const onClass = Reflect.getMetadata(IDEMPOTENT_ROUTE, provider) !== undefined;
      for (const name of this.scanner.getAllMethodNames(provider.prototype)) {
        if (onClass || Reflect.getMetadata(IDEMPOTENT_ROUTE, provider.prototype[name]) !== undefined) {
          throw new IdempotencyConfigurationError(unservedMessage('graphql', `${provider.name}.${name}`));
        }
      }
    }
  }

  private checkResponseIsRecordable(controller: Function, name: string, handler: Function, phased: boolean): void {
    const byClass = Reflect.getMetadata(IDEMPOTENT_ROUTE, handler) === undefined;
    const where = byClass ? `@Idempotent() on the class ${controller.name}, covering ${name}` : `@Idempotent() on ${controller.name}.${name}`;
    const leaveOut = byClass ? ' Or leave the handler out with @SkipIdempotency().' : '';
    if (Reflect.getMetadata(SSE_METADATA, handler)) {
      throw new IdempotencyConfigurationError(`${where}: server-sent events cannot be recorded or replayed. Remove @Idempotent() or @Sse().${leaveOut}`);
    }
    // Nest renders or redirects with what the handler returned, after the module made it the recorded text.
    if (Reflect.getMetadata(RENDER_METADATA, handler) !== undefined) {
      throw new IdempotencyConfigurationError(
        `${where}: @Render() passes the handler's result to a view engine after the module has recorded it as text, so the view would get a string. Return the rendered HTML from the handler instead, or remove @Idempotent().${leaveOut}`,
      );
    }
    if (Reflect.getMetadata(REDIRECT_METADATA, handler) !== undefined) {
      throw new IdempotencyConfigurationError(
        `${where}: @Redirect() reads its URL from the handler's result after the module has recorded it as text, so a URL the handler returns would be ignored. Answer with @HttpCode() and a Location header (@Header(), or @Res({ passthrough: true })), which the module replays, instead of @Redirect().${leaveOut}`,
      );
    }
    const params: Record<string, { index: number }> = Reflect.getMetadata(ROUTE_ARGS_METADATA, controller, name) ?? {};
    const takesResponse = Object.keys(params).some((key) => {
      const type = Number(key.split(':')[0]);
      return type === RouteParamtypes.RESPONSE || type === RouteParamtypes.NEXT;
    });
    if (takesResponse && phased) {
      throw new IdempotencyConfigurationError(
        `${where}: a phased route answers its operation's response, which the reaper may record without a request. Remove @Res() and return claim.run(...); set headers such as Location in the operation's respond().`,
      );
    }
    if (takesResponse && !Reflect.getMetadata(RESPONSE_PASSTHROUGH_METADATA, controller, name)) {
      throw new IdempotencyConfigurationError(
        `${where}: a handler that writes the response itself (@Res() or @Next()) cannot be recorded. Use @Res({ passthrough: true }) and return the body.${leaveOut}`,
      );
    }
  }
}

/**
 * Keys are scoped by operation, so two handlers that share one would replay
 * each other's answers. The operation the module derives from a route (its
 * method, path template and API version) leaves out what else tells routes
 * apart (RouterModule's module paths, hosts) and each path of a handler that
 * serves several: refuse those, naming the fix, rather than share keys no
 * one chose to share. Operations named in `@Idempotent()` may be shared.
 */
function checkOperationIsOwn(handler: string, route: IdempotentRoute, handlersOf: Map<string, { handler: string; derived: boolean }>): void {
  const derived = route.derivedFrom !== undefined;
  const fix = `name it: @Idempotent({ operation: '…' }) on ${handler}`;
  if (route.derivedFrom && route.derivedFrom.length > 1) {
    throw new IdempotencyConfigurationError(
      `@Idempotent() on ${handler}: the handler serves several paths (${route.derivedFrom.join(', ')}), and the operation derived from the first, "${route.operation}", would let a key sent to one path replay the answer of another. Give each path a handler of its own, or, to share keys between the paths on purpose, ${fix}.`,
    );
  }
  const other = handlersOf.get(route.operation);
  if (other && other.handler !== handler && (derived || other.derived)) {
    throw new IdempotencyConfigurationError(
      `@Idempotent() on ${handler} and on ${other.handler}: both have the operation "${route.operation}", so a key sent to one would replay the answer of the other (routes told apart by RouterModule's module paths or by host share a path template). Give each its own operation: ${fix}, or set it on ${other.handler}.`,
    );
  }
  handlersOf.set(route.operation, { handler, derived });
}

/**
 * The module answers a recorded outcome whose status is not the route's (a
 * 202, a stored 409) by throwing it to its own filter, which `@Idempotent()`
 * binds. Nest asks a route's filters in the reverse of their order (the
 * handler's before the class's, each written above another before it), and
 * the first that catches an error takes it: a filter asked before the
 * module's that catches every error (`@Catch()`, or `@Catch(Error)`) would
 * turn those answers into 500s, though their writes committed. Refuse it.
 */
function checkNoFilterCatchesFirst(controller: Function, name: string, handler: Function): void {
  const asked: unknown[] = [...(Reflect.getMetadata(EXCEPTION_FILTERS_METADATA, controller) ?? []), ...(Reflect.getMetadata(EXCEPTION_FILTERS_METADATA, handler) ?? [])].reverse();
  const typeOf = (filter: unknown) => (typeof filter === 'function' ? filter : (filter as object).constructor) as Function;
  const own = asked.findIndex((filter) => typeOf(filter) === IdempotencyFilter);
  const first = asked.slice(0, own).find((filter) => {
    const caught: Function[] = Reflect.getMetadata(FILTER_CATCH_EXCEPTIONS, typeOf(filter)) ?? [];
    return caught.length === 0 || caught.some((type) => RecordedOutcomeResponse.prototype instanceof type);
  });
  if (first === undefined) return;
  const filter = typeOf(first).name;
  const onClass = Reflect.getMetadata(IDEMPOTENT_ROUTE, handler) === undefined;
  throw new IdempotencyConfigurationError(
    `@Idempotent() on ${onClass ? `the class ${controller.name}, covering ${name}` : `${controller.name}.${name}`}: ${filter} catches every error and Nest asks it before the module's filter, ` +
      `so the answers the module replays with another status than the route's (a 202 set through @Res({ passthrough: true }), a stored 4xx) would become 500s. ` +
      (onClass
        ? `Bind it on the class, with @UseFilters(${filter}) written below @Idempotent() (a handler's filters are asked before its class's), or globally.`
        : `Write @UseFilters(${filter}) below @Idempotent() (decorators apply bottom-up, and Nest asks the filter applied last first), or bind it globally.`),
  );
}

/** An interceptor around a route, and the route's names for the message. */
type Around = InterceptorAround & { handler: string; controller: string };

const BOTTOM_UP = 'decorators apply bottom-up, and Nest runs the interceptor applied first outermost';

function adviceFor({ bound, idempotentOnClass, interceptor, handler, controller }: Around): string {
  const name = nameOf(interceptor);
  switch (bound) {
    case 'global':
      return `${name} is global (app.useGlobalInterceptors() or APP_INTERCEPTOR) and wraps ${handler}: bind it inside @Idempotent() instead, with @UseInterceptors(${name}) written above @Idempotent() on the handler or the controller.`;
    case 'class':
      return idempotentOnClass
        ? `${controller}: @UseInterceptors(${name}) is written below @Idempotent() on the class, so it runs around it: write it above (${BOTTOM_UP}).`
        : `${handler}: ${name} is bound on the class, and a class's interceptors run around the handler's @Idempotent(): bind it on the handler, written above @Idempotent().`;
    case 'handler':
      return `${handler}: @UseInterceptors(${name}) is written below @Idempotent(), so it runs around it: write it above (${BOTTOM_UP}).`;
  }
}

function interceptorsAroundMessage(reshapers: Around[]): string {
  const names = new Set(reshapers.map((outer) => nameOf(outer.interceptor)));
  return [
    'IdempotencyModule cannot start: a serializing interceptor runs around @Idempotent() routes, outside the outcome the module records.',
    'The module serialises the handler’s result, records that text and sends exactly it, the first time and on every replay. An interceptor around it',
    'gets that text, not the handler’s object: a ClassSerializerInterceptor changes nothing, so the fields it would @Exclude() are sent.',
    ...new Set(reshapers.map((outer) => `- ${adviceFor(outer)}`)),
    `If you are sure it may run around these routes, vouch for it: IdempotencyModule.forRoot({ allowInterceptorsAround: [${[...names].join(', ')}] }).`,
  ].join('\n');
}

function interceptorsAroundWarning(others: Around[]): string {
  const names = new Set(others.map((outer) => nameOf(outer.interceptor)));
  return [
    `${[...names].join(', ')} ${names.size === 1 ? 'runs' : 'run'} around @Idempotent() routes and so ${names.size === 1 ? 'gets' : 'get'} the recorded response text, the same on the first answer and on every replay.`,
    'If one reshapes bodies (an envelope, a serializer), bind it inside @Idempotent() instead:',
    ...new Set(others.map((outer) => `- ${adviceFor(outer)}`)),
    `If none does, say so and this warning goes: IdempotencyModule.forRoot({ allowInterceptorsAround: [${[...names].join(', ')}] }).`,
  ].join('\n');
}
