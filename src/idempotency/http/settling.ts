import { Observable } from 'rxjs';

/**
 * What `settle` returns, or what its promise resolves to, as an Observable of
 * one value, started on subscription as Nest's interceptor chain expects:
 * what `defer(async () => …)` gives, without its layers on every request. A
 * value settled at once (a replay from the cache) is emitted at once, with no
 * promise and no turn of the microtask queue. `abandoned` is called when the
 * subscriber leaves before it settled (an outer `timeout()` gave up).
 */
export function settling<T>(settle: () => T | Promise<T>, abandoned?: () => void): Observable<T> {
  return new Observable<T>((subscriber) => {
    let ended = false;
    const emit = (value: T) => {
      ended = true;
      subscriber.next(value);
      subscriber.complete();
    };
    const fail = (error: unknown) => {
      ended = true;
      subscriber.error(error);
    };
    const settled = settle(); // a throw here reaches the subscriber as an error, as rxjs delivers one from a subscribe function
    if (settled instanceof Promise) settled.then(emit, fail);
    else emit(settled);
    return abandoned && (() => ended || abandoned());
  });
}

/** `next` of a value: at once where it is one, else once its promise fulfils. */
export function andThen<T, U>(value: T | Promise<T>, next: (value: T) => U): U | Promise<U> {
  return value instanceof Promise ? value.then(next) : next(value);
}
