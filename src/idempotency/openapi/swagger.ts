import type { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { IdempotentRoutes } from '../http/idempotent-route.js';
import type { ResolvedModuleOptions } from '../options/idempotency.options.js';

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

/**
 * Documents the app's idempotent routes in its OpenAPI document, where it
 * has @nestjs/swagger and `openapi` is on; an app without the peer loads
 * none of the code that would. A provider's factory, so that it runs while
 * the app is created, before `SwaggerModule.createDocument()` reads the
 * metadata.
 */
export async function documentRoutes(discovery: DiscoveryService, scanner: MetadataScanner, routes: IdempotentRoutes, options: ResolvedModuleOptions): Promise<void> {
  if (!options.openapi) return;
  const swagger = await loadSwagger();
  if (!swagger) return;
  const { documentIdempotentRoutes } = await import('./idempotency-openapi.js');
  documentIdempotentRoutes(swagger, discovery, scanner, routes);
}
