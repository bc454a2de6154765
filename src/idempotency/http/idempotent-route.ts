import { HttpException, HttpStatus, Inject, Injectable, Logger, RequestMethod } from '@nestjs/common';
import { type AbstractHttpAdapter, HttpAdapterHost, Reflector } from '@nestjs/core';
import {
  IdempotencyConfigurationError,
  IdempotencyRequestInProgressException,
  IdempotencyRequestNotCanonicalException,
  IdempotencyTenantUnresolvedException,
} from '../errors/idempotency.exceptions.js';
import { checkedBodyBound, type IdempotentOptions, type IsolationLevel, isolationLevelOf, mergeRouteOptions, type ResolvedModuleOptions } from '../options/idempotency.options.js';
import { IDEMPOTENT_ROUTE, RESOLVED_IDEMPOTENCY_OPTIONS, SKIP_IDEMPOTENCY } from '../options/idempotency.tokens.js';
import { HTTP_CODE_METADATA, METHOD_METADATA, PATH_METADATA, VERSION_METADATA } from './nest-internals.js';
import type { OneTransactionTerms } from '../flow/one-transaction.terms.js';
import { captureSuccess } from '../outcome/outcome-capture.js';
import { appBodyLimitOf } from './request-body.js';
import type { RecordedOutcome } from '../outcome/recorded-outcome.js';
import type { ResponseGuard } from '../outcome/response-guard.js';
import { CircularReferenceError } from '../fingerprint/canonical-json.js';
import { canonicalRequest, fingerprintFieldsOf, type ReadBody, readsBody } from '../fingerprint/request-fingerprint.js';
import type { FingerprintedRecord, RequestFingerprint, RequestFingerprints } from '../fingerprint/request-fingerprints.js';

/** Everything the request flow needs about one route, worked out once. */
export interface IdempotentRoute {
  operation: string;
  /**
   * The paths the operation was derived from, when `@Idempotent()` named none:
   * one path template per path the handler serves. Unset for a named operation.
   */
  derivedFrom?: readonly string[];
  headerName: string;
  required: boolean;
  retention: number;
  wait: number;
  /** The route's own isolation level; unset, the app's (see `IdempotentOptions.isolation`). */
  isolation?: IsolationLevel;
  retryAfterSeconds: number;
  /** The status Nest answers a success with: `@HttpCode()`, else 201 for POST and 200 otherwise. */
  successStatus: number;
  /** The statuses `storeErrors` lists: what a phased operation records, even when the reaper finishes it. */
  storeErrors: ReadonlySet<number>;
  /** Whether some failures may be recorded, so the flow keeps a savepoint to undo the handler's writes to. */
  recordsErrors: boolean;
  /** Whether a failure of the handler is recorded and replayed: a 4xx `HttpException` that `storeErrors` lists or `storeIf` selects; never a 5xx. */
  storesError(error: unknown): error is HttpException;
  /** Set for phased routes: the lease of their claims, in ms. */
  lease: number | undefined;
  replayHeaders: readonly string[];
  scopeOf(request: unknown): string;
  /** The fields to fingerprint; `read`, a body the module read itself, stands in for `request.body`. */
  fingerprintFieldsOf(request: unknown, read?: ReadBody): unknown;
  /** Whether those fields are data a parser produced, never a fingerprint function's value: see `fieldsJsonOf`. */
  fieldsAreData: boolean;
  /** Whether those fields include the HTTP request's body, so that a body no parser read must be read (request-body.ts). */
  readsBody: boolean;
  /** The most bytes of such a body the module reads (`maxBodyBytes`). */
  maxBodyBytes: number;
  /** How a success is recorded where it is not an HTTP response (a GraphQL field's value); HTTP routes leave it unset. */
  capture?(result: unknown): RecordedOutcome;
}

/** The fields the route fingerprints; a request they cannot be taken from is refused (400). */
export function fingerprintedFields(route: IdempotentRoute, request: unknown, read?: ReadBody): unknown {
  return refusedUnlessCanonical(route, () => route.fingerprintFieldsOf(request, read));
}

/** The fingerprint of those fields, for the record `id`; fields without a canonical form are refused (400). */
export function fingerprintOf(route: IdempotentRoute, fingerprints: RequestFingerprints, id: FingerprintedRecord, fields: unknown, bodyReadAs?: ReadBody['readAs']): RequestFingerprint {
  return fingerprints.of(id, refusedUnlessCanonical(route, () => canonicalRequest(route.operation, fields, bodyReadAs)));
}

function refusedUnlessCanonical<T>(route: IdempotentRoute, work: () => T): T {
  try {
    return work();
  } catch (error) {
    // The server's doing, not the client's: say so, and how to fix it, rather than answer 400.
    if (error instanceof CircularReferenceError) {
      throw new IdempotencyConfigurationError(
        `${route.operation}: the fields to fingerprint hold an object that refers to itself, which has no canonical form. A body parser may have put such objects ` +
          `on request.body (@fastify/multipart with attachFieldsToBody: true does: use attachFieldsToBody: 'keyValues'), or a fingerprint function returned one. ` +
          `Name plain fields instead: @Idempotent({ fingerprint: ['body.amount', ...] }) or a function returning plain data.`,
      );
    }
    throw new IdempotencyRequestNotCanonicalException((error as Error).message);
  }
}

/**
 * A route's (or a GraphQL field's) terms for the one-transaction flow: a
 * success recorded as the response it answers (or by the route's own
 * `capture`), the failures the route stores, 409 for a key held in flight.
 */
export function oneTransactionTermsOf(route: IdempotentRoute, adapter: AbstractHttpAdapter, response: unknown, guard: ResponseGuard | undefined): OneTransactionTerms {
  const terms: OneTransactionTerms = {
    retention: route.retention,
    wait: route.wait,
    isolation: route.isolation,
    capture: (result) => (route.capture ? route.capture(result) : captureSuccess(result, route, adapter, response)),
    inProgress: () => new IdempotencyRequestInProgressException(route.retryAfterSeconds),
  };
  // Assigned, not spread: this runs for every request.
  if (route.recordsErrors) terms.storesError = (error: unknown): error is HttpException => route.storesError(error);
  if (guard) terms.restoreResponse = () => guard.restore();
  return terms;
}

/** How a feature's handler differs from a route: whether a class-level `@Idempotent()` covers it, and the operation derived for it. */
export interface HandlerKind {
  coveredByClass: boolean;
  operation: string;
}

/** The request methods a class-level `@Idempotent()` covers. */
const COVERED_BY_CLASS: ReadonlySet<RequestMethod> = new Set([RequestMethod.POST, RequestMethod.PUT, RequestMethod.PATCH, RequestMethod.DELETE]);

/** Route options that name one handler's work, and so have no meaning on a class. */
const HANDLER_ONLY: ReadonlyArray<keyof IdempotentOptions> = ['operation', 'phases'];

/**
 * Reads `@Idempotent()` metadata once per handler and keeps the result. A
 * handler's own `@Idempotent(options)` is merged over its class's (see
 * `mergeRouteOptions`); a class-level one alone covers POST, PUT, PATCH and
 * DELETE handlers, and a resolver's mutations; `@SkipIdempotency()` leaves a
 * handler out.
 */
@Injectable()
export class IdempotentRoutes {
  /** By controller, then handler: a base class's handler may be idempotent in one subclass and not another. */
  private readonly routes = new Map<Function, Map<Function, IdempotentRoute | null>>();
  private readonly logger = new Logger('Idempotency');

  constructor(
    private readonly reflector: Reflector,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  /**
   * The route's settings, or undefined where the handler is not
   * `@Idempotent()`; a feature's handler (a GraphQL resolver's) says how it
   * differs from a route with `kind`.
   */
  of(controller: Function, handler: Function, kind?: HandlerKind): IdempotentRoute | undefined {
    let handlers = this.routes.get(controller);
    if (!handlers) this.routes.set(controller, (handlers = new Map()));
    let route = handlers.get(handler);
    if (route === undefined) {
      const options = this.optionsOf(controller, handler, kind);
      route = options ? this.build(options, controller, handler, kind) : null;
      handlers.set(handler, route);
    }
    return route ?? undefined;
  }

  /** The options that apply to a handler, from its own and its class's decorators; undefined where none do. */
  private optionsOf(controller: Function, handler: Function, kind: HandlerKind | undefined): IdempotentOptions | undefined {
    const own = this.reflector.get<IdempotentOptions | undefined>(IDEMPOTENT_ROUTE, handler);
    const skipped = this.reflector.get<boolean | undefined>(SKIP_IDEMPOTENCY, handler) === true;
    if (own && skipped) {
      throw new IdempotencyConfigurationError(`${controller.name}.${handler.name} has both @Idempotent() and @SkipIdempotency(): keep one.`);
    }
    if (skipped) return undefined;
    const inherited = this.reflector.get<IdempotentOptions | undefined>(IDEMPOTENT_ROUTE, controller);
    if (inherited) {
      const named = HANDLER_ONLY.filter((option) => inherited[option] !== undefined);
      if (named.length > 0) {
        throw new IdempotencyConfigurationError(
          `@Idempotent() on the class ${controller.name}: ${named.join(' and ')} name${named.length === 1 ? 's' : ''} one handler's work, and would be shared by every handler it covers. Set ${named.length === 1 ? 'it' : 'them'} in @Idempotent() on the handler.`,
        );
      }
    }
    if (own) return inherited ? mergeRouteOptions(inherited, own) : own;
    const method: RequestMethod | undefined = Reflect.getMetadata(METHOD_METADATA, handler);
    const covered = kind ? kind.coveredByClass : method !== undefined && COVERED_BY_CLASS.has(method);
    return inherited && covered ? inherited : undefined;
  }

  private build(options: IdempotentOptions, controller: Function, handler: Function, kind: HandlerKind | undefined): IdempotentRoute {
    const where = `@Idempotent() on ${controller.name}.${handler.name}`;
    const method: RequestMethod = Reflect.getMetadata(METHOD_METADATA, handler) ?? RequestMethod.GET;
    const storesError = errorRuleOf(options, where);
    const retention = options.retention ?? this.options.retention;
    const wait = options.wait ?? this.options.wait;
    if (!(retention > 0)) throw new IdempotencyConfigurationError(`${where}: retention must be a positive number of ms, got ${retention}.`);
    if (!(wait >= 0)) throw new IdempotencyConfigurationError(`${where}: wait must be a number of ms >= 0, got ${wait}.`);
    const paths = options.operation === undefined && kind === undefined ? routeTemplates(controller, handler) : undefined;
    const operation = options.operation ?? kind?.operation ?? `${RequestMethod[method]} ${paths![0]}${versionLabel(controller, handler)}`;
    const version = options.version === undefined ? '' : ` version:${encodeURIComponent(options.version)}`;
    const isolation = options.isolation === undefined ? undefined : isolationLevelOf(options.isolation);
    if (options.isolation !== undefined && !isolation) {
      throw new IdempotencyConfigurationError(`${where}: isolation must be 'READ COMMITTED', 'REPEATABLE READ' or 'SERIALIZABLE', got ${JSON.stringify(options.isolation)}.`);
    }
    if (isolation && options.phases) {
      throw new IdempotencyConfigurationError(`${where}: a phased route runs each local phase in a READ COMMITTED transaction of its own; isolation is for one-transaction routes.`);
    }
    return {
      operation,
      derivedFrom: paths,
      headerName: this.options.headerName,
      required: options.required ?? true,
      retention,
      wait,
      isolation,
      retryAfterSeconds: Math.max(1, Math.ceil(wait / 1000)),
      successStatus: Reflect.getMetadata(HTTP_CODE_METADATA, handler) ?? (method === RequestMethod.POST ? HttpStatus.CREATED : HttpStatus.OK),
      storeErrors: new Set(options.storeErrors ?? []),
      recordsErrors: (options.storeErrors?.length ?? 0) > 0 || options.storeIf !== undefined,
      storesError,
      lease: options.phases ? (options.lease ?? this.options.lease) : undefined,
      replayHeaders: this.options.replayHeaders,
      scopeOf: this.scopeOf(operation, `${operation} (${controller.name}.${handler.name})`, version),
      fingerprintFieldsOf: fingerprintFieldsOf(options.fingerprint),
      fieldsAreData: typeof options.fingerprint !== 'function',
      readsBody: readsBody(options.fingerprint),
      maxBodyBytes: checkedBodyBound(options.maxBodyBytes, where) ?? this.options.maxBodyBytes ?? appBodyLimitOf(this.adapterHost.httpAdapter?.getInstance()),
    };
  }

  /**
   * The scope of a request's keys. `tenant: 'shared'`: `anonymous`, the scope
   * keys had before `tenant` was required, so that their records still
   * replay. A resolver: `tenant:<its tenant>`, which never equals
   * `anonymous`; a request it finds no tenant for is refused (401) rather
   * than put in a scope others share. An empty string counts as none: it is
   * what a header sent empty or a claim read as `''` gives, and every such
   * request would share the one scope `tenant:`.
   */
  private scopeOf(operation: string, route: string, version: string): (request: unknown) => string {
    const { tenant } = this.options;
    if (tenant === 'shared') {
      const warnIfUsersShareScope = this.sharedScopeWarning(route);
      return (request) => {
        warnIfUsersShareScope(request);
        return 'anonymous' + version;
      };
    }
    return (request) => {
      const resolved = tenant(request);
      if (resolved === undefined || resolved === null || resolved === '') throw new IdempotencyTenantUnresolvedException(operation);
      return `tenant:${encodeURIComponent(resolved)}${version}`;
    };
  }

  /**
   * `tenant: 'shared'` puts every request in one scope of keys, which is
   * right for an app without users; a request with `user` set says the app
   * has them. Warns once per route, at the first such request.
   */
  private sharedScopeWarning(route: string): (request: unknown) => void {
    let warned = false;
    return (request) => {
      if (warned || (request as { user?: unknown } | null)?.user == null) return;
      warned = true;
      this.logger.warn(
        `${route}: requests carry req.user, but IdempotencyModule has tenant: 'shared', so all users share one scope of keys ` +
          `and one user's key replays another's response. Scope keys by tenant or user: IdempotencyModule.forRoot({ tenant: (request) => request.user.tenantId }).`,
      );
    };
  }
}

/**
 * Which failures a route records: `storeErrors` lists 4xx statuses, `storeIf`
 * selects among 4xx failures. A 5xx is never recorded: its writes rolled
 * back, so the retry is safe and should run again.
 */
function errorRuleOf(options: IdempotentOptions, where: string): (error: unknown) => error is HttpException {
  const { storeErrors, storeIf } = options;
  if (storeErrors !== undefined && storeIf !== undefined) {
    throw new IdempotencyConfigurationError(`${where}: give storeErrors or storeIf, not both. storeErrors: [402] is storeIf: (status) => status === 402.`);
  }
  if (storeIf !== undefined && typeof storeIf !== 'function') {
    throw new IdempotencyConfigurationError(`${where}: storeIf must be a function (status, error) => boolean, got ${typeof storeIf}.`);
  }
  if (storeIf && options.phases) {
    throw new IdempotencyConfigurationError(
      `${where}: a phased route takes storeErrors, not storeIf: the reaper finishes an abandoned phased operation without the route, from the statuses stored with its claim.`,
    );
  }
  const listed = new Set(storeErrors ?? []);
  for (const status of listed) {
    if (!isClientError(status)) {
      throw new IdempotencyConfigurationError(`${where}: storeErrors may list 4xx statuses only, got ${status}. 5xx failures are never recorded, so a retry runs again.`);
    }
  }
  const selects = storeIf ?? ((status: number) => listed.has(status));
  return (error): error is HttpException => error instanceof HttpException && isClientError(error.getStatus()) && Boolean(selects(error.getStatus(), error));
}

function isClientError(status: number): boolean {
  return Number.isInteger(status) && status >= 400 && status <= 499;
}

/**
 * `/orders/:id/payments` from the controller's and the method's paths: one
 * template for each path the handler serves (either may list several).
 */
function routeTemplates(controller: Function, handler: Function): string[] {
  const all = (path: string | string[] | undefined) => (Array.isArray(path) ? (path.length > 0 ? path : ['']) : [path ?? '']);
  const templates = all(Reflect.getMetadata(PATH_METADATA, controller)).flatMap((outer) =>
    all(Reflect.getMetadata(PATH_METADATA, handler)).map((inner) => `/${outer}/${inner}`.replace(/\/+/g, '/').replace(/(.)\/$/, '$1')),
  );
  return [...new Set(templates)];
}

/**
 * ` (version 2)` for a handler or controller of a versioned API: `@Version()`
 * or `@Controller({ version })`. Handlers of two versions may share a path
 * (header or media-type versioning) and must not share keys.
 */
function versionLabel(controller: Function, handler: Function): string {
  const version: unknown = Reflect.getMetadata(VERSION_METADATA, handler) ?? Reflect.getMetadata(VERSION_METADATA, controller);
  if (version === undefined) return '';
  const versions = (Array.isArray(version) ? version : [version]).map((value) => (typeof value === 'symbol' ? 'neutral' : String(value)));
  return ` (version ${versions.join(', ')})`;
}
