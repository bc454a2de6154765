import { type CanActivate, type ExecutionContext, Global, Inject, Injectable, mixin, Module, Optional, type Type } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import request from 'supertest';
import { IdempotencyAdminModule } from '../src/idempotency/admin/index.js';
import { compileAdmin } from './support/admin-boot.js';
import { startApp, type RunningApp } from './support/http-app.js';
import { LEDGER_SCHEMA, ledgerAppModules } from './support/ledger-app.js';
import { createTestDatabase, type TestDatabase } from './support/test-database.js';

const operatorOf = (context: ExecutionContext): string | undefined => context.switchToHttp().getRequest().headers['x-operator'];

/** Who may operate, from a global module: what a guard class injects besides Nest's own Reflector. */
@Injectable()
class OperatorDirectory {
  knows(operator: string | undefined): boolean {
    return operator === 'root';
  }
}

@Global()
@Module({ providers: [OperatorDirectory], exports: [OperatorDirectory] })
class OperatorDirectoryModule {}

/** Nest's usual guard: a class with its dependencies, as `@UseGuards(RolesGuard)` takes it. */
@Injectable()
class RolesGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly directory: OperatorDirectory,
  ) {}

  canActivate(context: ExecutionContext): boolean {
    return this.reflector instanceof Reflector && this.directory.knows(operatorOf(context));
  }
}

const HEADER_GUARD_OPTIONS = Symbol('header-guard-options');

/** Built as `AuthGuard('jwt')` is: a function that returns a class, through `mixin()`, with an optional injected option. */
function HeaderGuard(header: string): Type<CanActivate> {
  class MixinHeaderGuard implements CanActivate {
    constructor(@Optional() @Inject(HEADER_GUARD_OPTIONS) readonly options?: { value: string }) {}

    canActivate(context: ExecutionContext): boolean {
      return context.switchToHttp().getRequest().headers[header] === (this.options?.value ?? 'root');
    }
  }
  return mixin(MixinHeaderGuard);
}

/** A dependency only a module the admin imports provides. */
@Injectable()
class Badges {
  readonly valid = new Set(['root']);
}

@Module({ providers: [Badges], exports: [Badges] })
class BadgesModule {}

@Injectable()
class BadgeGuard implements CanActivate {
  constructor(private readonly badges: Badges) {}

  canActivate(context: ExecutionContext): boolean {
    return this.badges.valid.has(operatorOf(context) ?? '');
  }
}

describe('admin guards given as classes', () => {
  let db: TestDatabase;
  let app: RunningApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.query(LEDGER_SCHEMA);
    app = await startApp({
      imports: [
        ...ledgerAppModules(db.url, { reaper: false }),
        OperatorDirectoryModule,
        IdempotencyAdminModule.forRoot({ path: 'roles', guard: RolesGuard, scopes: 'all' }),
        IdempotencyAdminModule.forRoot({ path: 'mixin', guard: HeaderGuard('x-operator'), scopes: 'all' }),
        IdempotencyAdminModule.forRootAsync({ path: 'badges', imports: [BadgesModule], useFactory: () => ({ guard: BadgeGuard, scopes: 'all' }) }),
      ],
    });
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it.each([
    ['a class with dependencies, from a global module and Nest', 'roles'],
    ['a mixin class, as AuthGuard() returns', 'mixin'],
    ['a class whose dependency forRootAsync() imports', 'badges'],
  ])('let in whom %s lets in, and no one else', async (_case, path) => {
    await request(app.url).get(`/${path}/api/records`).set('X-Operator', 'root').expect(200);
    await request(app.url).get(`/${path}/api/records`).set('X-Operator', 'stranger').expect(403);
  });
});

describe('admin guards that cannot be created', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it.each([
    ['a guard class whose dependency the admin cannot reach', BadgeGuard, /cannot create its guard BadgeGuard: .*Badges.*make what it injects available there .*forRootAsync\(\{ imports:/s],
    ['a class that is no guard', class NotAGuard {}, /its guard NotAGuard is a class without a canActivate method/],
  ])('refuse to start with %s, naming the fix', async (_case, guard, message) => {
    await expect(compileAdmin(db.url, { guard: guard as never, scopes: 'all' })).rejects.toThrow(message);
  });
});
