/** @nestjs/swagger, an optional peer: the OpenAPI decorators of idempotent routes and of the admin API. */
export type Swagger = typeof import('@nestjs/swagger');

/**
 * @nestjs/swagger, or undefined where the app does not have it. Its absence
 * is not logged: an app that left the optional peer out knows it has no
 * OpenAPI document, and Nest's default logger would print the line, at any
 * level, in every app started without it.
 */
export function loadSwagger(): Promise<Swagger | undefined> {
  return import('@nestjs/swagger').catch(() => undefined);
}
