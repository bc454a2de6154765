import { HandlerRun } from '../flow/handler-run.js';

type Method = (...args: unknown[]) => unknown;

/** The methods already wrapped, so that a class-level and a method's own `@Idempotent()` wrap once. */
const wrappers = new WeakSet<Method>();

/**
 * Makes a decorated method tell the flow running it that it was called and
 * what it returned (see `HandlerRun`), so that the flow can wait for the
 * handler's own work to settle. On a class, every method of its own
 * prototype: the flow counts only the first call of a run, the handler Nest
 * calls, so a method that is never a handler costs one lookup per call.
 *
 * The wrapper keeps the method's name and the metadata decorators applied
 * before it put on the function; those applied after put theirs on it.
 */
export function trackHandlerCalls(target: object, key?: string | symbol, descriptor?: PropertyDescriptor): void {
  if (descriptor) {
    if (typeof descriptor.value === 'function') descriptor.value = tracked(descriptor.value as Method);
    return;
  }
  const prototype = (target as { prototype?: object }).prototype;
  if (!prototype) return;
  for (const name of Object.getOwnPropertyNames(prototype)) {
    const own = Object.getOwnPropertyDescriptor(prototype, name);
    if (name === 'constructor' || typeof own?.value !== 'function') continue;
    Object.defineProperty(prototype, name, { ...own, value: tracked(own.value as Method) });
  }
}

function tracked(method: Method): Method {
  if (wrappers.has(method)) return method;
  const wrapper = function (this: unknown, ...args: unknown[]) {
    const returned = method.apply(this, args);
    HandlerRun.called(returned);
    return returned;
  };
  Object.defineProperty(wrapper, 'name', { value: method.name });
  for (const metadataKey of Reflect.getOwnMetadataKeys(method)) {
    Reflect.defineMetadata(metadataKey, Reflect.getOwnMetadata(metadataKey, method), wrapper);
  }
  wrappers.add(wrapper);
  return wrapper;
}
