import type { CanActivate, ExecutionContext, Type } from '@nestjs/common';
import type { Observable } from 'rxjs';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';

/** What the app's guard decides for one request. */
export type CanActivateFn = (context: ExecutionContext) => boolean | Promise<boolean> | Observable<boolean>;

/**
 * Lets a request into the admin or not: a guard class (`RolesGuard`,
 * `AuthGuard('jwt')`), created with what it injects as `@UseGuards()` would
 * create it; a guard instance; or the function a guard's `canActivate` would be.
 */
export type AdminGuardOption = Type<CanActivate> | CanActivate | CanActivateFn;

/** Creates a guard class with its dependencies, in the admin module's injector (`ModuleRef.create`). */
export type GuardFactory = (guard: Type<CanActivate>) => Promise<CanActivate>;

/**
 * The app's `guard` option as the function the admin's gate calls: an
 * instance's `canActivate`, a function as it is, or a class (`RolesGuard`,
 * `AuthGuard('jwt')`) created once at startup with what it injects, as
 * Nest creates a `@UseGuards()` class in its controller's module. A guard
 * that cannot be created, or none, fails the boot with the fix.
 */
export async function appGuardOf(guard: AdminGuardOption | undefined, create: GuardFactory): Promise<CanActivateFn> {
  if (isGuardClass(guard)) {
    const instance = await create(guard).catch((error: unknown) => {
      throw new IdempotencyConfigurationError(
        `IdempotencyAdminModule cannot create its guard ${guard.name}: ${error instanceof Error ? error.message : String(error)} ` +
          'A guard class is created in the admin module\'s injector, as @UseGuards() creates one in its controller\'s module: make what it injects available there ' +
          `(from a global module, or with forRootAsync({ imports: [the module that exports it], useFactory: () => ({ guard: ${guard.name}, scopes }) })), or pass an instance.`,
      );
    });
    return instance.canActivate.bind(instance);
  }
  if (typeof guard === 'function' && isClass(guard)) {
    throw new IdempotencyConfigurationError(`IdempotencyAdminModule: its guard ${guard.name} is a class without a canActivate method. Pass a CanActivate class or instance, or a function of the ExecutionContext.`);
  }
  if (typeof guard === 'function') return guard as CanActivateFn;
  if (typeof guard?.canActivate === 'function') return guard.canActivate.bind(guard);
  throw new IdempotencyConfigurationError(
    'IdempotencyAdminModule refuses to start without a guard: its pages and API show recorded answers and free keys. ' +
      'Pass `guard`, a CanActivate class or instance, or a function of the ExecutionContext that lets only operators through, e.g. ' +
      "IdempotencyAdminModule.forRoot({ path: 'admin/idempotency', guard: (context) => context.switchToHttp().getRequest().user?.roles?.includes('admin'), scopes: 'all' }).",
  );
}

/** A class whose instances guard: `canActivate` on its prototype, whether written as a class or compiled to a function. */
function isGuardClass(guard: AdminGuardOption | undefined): guard is Type<CanActivate> {
  return typeof guard === 'function' && typeof (guard.prototype as Partial<CanActivate> | undefined)?.canActivate === 'function';
}

/** A class, which calling without `new` throws. */
function isClass(fn: Function): boolean {
  return /^class[\s{]/.test(Function.prototype.toString.call(fn));
}
