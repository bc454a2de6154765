import { ClassSerializerInterceptor, type NestInterceptor, type Type } from '@nestjs/common';
import type { ApplicationConfig } from '@nestjs/core';
import { IdempotencyInterceptor } from '../http/idempotency.interceptor.js';
import { INTERCEPTORS_METADATA } from '../http/nest-internals.js';

/** An interceptor as Nest binds it: a class it instantiates, or an instance. */
type BoundInterceptor = Type<NestInterceptor> | NestInterceptor;

/** An interceptor that runs around the module's on a route, outside the outcome it records. */
export interface InterceptorAround {
  interceptor: BoundInterceptor;
  /** Where it is bound: globally, on the controller class, or on the handler. */
  bound: 'global' | 'class' | 'handler';
  /** Whether the module's interceptor is bound on the class (a class-level `@Idempotent()`). */
  idempotentOnClass: boolean;
}

/**
 * The global interceptors: those of `app.useGlobalInterceptors()` called
 * before `init()`, and `APP_INTERCEPTOR` providers (request-scoped ones as
 * their class). Nest builds a route's interceptor chain when it registers the
 * route, during `init()`, so these are all that wrap a controller that is
 * not request-scoped.
 */
export function globalInterceptors(config: ApplicationConfig): InterceptorAround[] {
  const scoped = config.getGlobalRequestInterceptors().map((wrapper) => wrapper.metatype as Type<NestInterceptor> | null);
  return [...config.getGlobalInterceptors(), ...scoped]
    .filter((interceptor): interceptor is BoundInterceptor => interceptor != null && classOf(interceptor) !== IdempotencyInterceptor)
    .map((interceptor) => ({ interceptor, bound: 'global', idempotentOnClass: false }));
}

/**
 * The interceptors bound on a route (`@UseInterceptors()`) that run before
 * the module's: Nest runs the class's, then the handler's, each in the order
 * the decorators were applied, which is bottom-up. The first binding of the
 * module's interceptor runs the flow.
 */
export function routeInterceptorsAround(controller: Function, handler: Function): InterceptorAround[] {
  const onClass: BoundInterceptor[] = Reflect.getMetadata(INTERCEPTORS_METADATA, controller) ?? [];
  const onHandler: BoundInterceptor[] = Reflect.getMetadata(INTERCEPTORS_METADATA, handler) ?? [];
  const chain = [...onClass, ...onHandler];
  const ours = chain.findIndex((interceptor) => classOf(interceptor) === IdempotencyInterceptor);
  if (ours < 0) return [];
  return chain.slice(0, ours).map((interceptor, index) => ({ interceptor, bound: index < onClass.length ? 'class' : 'handler', idempotentOnClass: ours < onClass.length }));
}

/** Whether the app vouched for the interceptor, by instance or by its exact class. */
export function isVouchedFor(interceptor: BoundInterceptor, allowed: readonly BoundInterceptor[]): boolean {
  const type = classOf(interceptor);
  return allowed.some((vouched) => vouched === interceptor || vouched === type);
}

/** Whether the interceptor turns the handler's object into the body: Nest's serializer, or a subclass of it. */
export function isKnownReshaper(interceptor: BoundInterceptor): boolean {
  const type = classOf(interceptor);
  return type === ClassSerializerInterceptor || type.prototype instanceof ClassSerializerInterceptor;
}

/** The interceptor's name as the app's code spells it. */
export function nameOf(interceptor: BoundInterceptor): string {
  const type = classOf(interceptor);
  return type === Object || !type.name ? 'an interceptor object' : type.name;
}

function classOf(interceptor: BoundInterceptor): Function {
  return typeof interceptor === 'function' ? interceptor : interceptor.constructor;
}
