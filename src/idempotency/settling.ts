import { Observable } from 'rxjs';

/**
 * What `settle` resolves to, as an Observable of one value, started on
 * subscription as Nest's interceptor chain expects: what `defer(async () => …)`
 * gives, without its layers on every request.
 */
export function settling<T>(settle: () => Promise<T>): Observable<T> {
  return new Observable<T>((subscriber) => {
    settle().then(
      (value) => {
        subscriber.next(value);
        subscriber.complete();
      },
      (error: unknown) => subscriber.error(error),
    );
  });
}
