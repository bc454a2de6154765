import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';
import { installedVersions, satisfies, SUPPORTED_PEERS, type SupportedPeer } from './installed-versions.js';

/** `It supports @nestjs/common ^10.0.0 || ..., typeorm ^0.3.0 || ^1.0.0`: the ranges, for messages. */
export const SUPPORTED_RANGES = `It supports ${Object.entries(SUPPORTED_PEERS)
  .map(([name, range]) => `${name} ${range}`)
  .join(', ')}`;

/** `Found @nestjs/common 11.1.6, @nestjs/core 11.1.6, typeorm 0.3.27`: the versions installed, for messages. */
export function versionsFound(versions: Record<SupportedPeer, string | undefined> = installedVersions()): string {
  return `Found ${Object.entries(versions)
    .map(([name, version]) => `${name} ${version ?? '(version not found)'}`)
    .join(', ')}`;
}

/**
 * Throws when the installed Nest or TypeORM is outside the ranges the module
 * supports. `forRoot()` and `forRootAsync()` call it, so that it runs as the
 * app's module is defined, before Nest scans the modules: on TypeORM 0.2 the
 * scan itself fails, in `@nestjs/typeorm`, with a TypeError that names
 * neither the package nor the versions.
 */
export function refuseUnsupportedVersions(): void {
  const versions = installedVersions();
  const outside = (Object.keys(SUPPORTED_PEERS) as SupportedPeer[]).filter((name) => versions[name] !== undefined && !satisfies(versions[name]!, SUPPORTED_PEERS[name]));
  if (outside.length === 0) return;
  throw new IdempotencyConfigurationError(
    `IdempotencyModule cannot start: ${outside.map((name) => `${name} ${versions[name]}`).join(' and ')} ${outside.length > 1 ? 'are' : 'is'} outside the versions it supports. ` +
      `${versionsFound(versions)}. ${SUPPORTED_RANGES}. Install a supported version: see "Upgrading and compatibility" in the documentation (docs/upgrading.md).`,
  );
}
