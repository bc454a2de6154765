import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** The peers whose versions decide whether the module can run, with the ranges it supports (package.json's peerDependencies). */
export const SUPPORTED_PEERS = {
  '@nestjs/common': '^10.0.0 || ^11.0.0 || ^12.0.0',
  '@nestjs/core': '^10.0.0 || ^11.0.0 || ^12.0.0',
  typeorm: '^0.3.0 || ^1.0.0',
} as const;

export type SupportedPeer = keyof typeof SUPPORTED_PEERS;

/** The version of each peer as the module resolves it, or undefined where it cannot tell (a bundle without node_modules). */
export function installedVersions(): Record<SupportedPeer, string | undefined> {
  const require = requireFromHere();
  const versions = {} as Record<SupportedPeer, string | undefined>;
  for (const name of Object.keys(SUPPORTED_PEERS) as SupportedPeer[]) versions[name] = require && versionOf(name, require);
  return versions;
}

/**
 * Whether `version` is in `range`: caret ranges joined by `||`, as npm reads
 * them (`^0.3.0` is 0.3.x, `^1.0.0` is 1.x, and a prerelease matches none).
 */
export function satisfies(version: string, range: string): boolean {
  const found = /^(\d+)\.(\d+)\.(\d+)$/.exec(version);
  if (!found) return false;
  const [major, minor, patch] = found.slice(1).map(Number);
  return range.split('||').some((alternative) => {
    const caret = /^\s*\^(\d+)\.(\d+)\.(\d+)\s*$/.exec(alternative);
    if (!caret) throw new Error(`the range ${range} is not written as caret ranges joined by ||`);
    const [low, lowMinor, lowPatch] = caret.slice(1).map(Number);
    const atLeast = major > low || (major === low && (minor > lowMinor || (minor === lowMinor && patch >= lowPatch)));
    return atLeast && major === low && (low > 0 || minor === lowMinor);
  });
}

/** From the package.json above the package's main file: TypeORM's `exports` leave package.json out. */
function versionOf(name: string, require: NodeJS.Require): string | undefined {
  let main: string;
  try {
    main = require.resolve(name);
  } catch {
    return undefined;
  }
  for (let dir = dirname(main); dirname(dir) !== dir; dir = dirname(dir)) {
    const manifest = readManifest(join(dir, 'package.json'));
    if (manifest?.name === name) return manifest.version;
  }
  return undefined;
}

function readManifest(path: string): { name?: string; version?: string } | undefined {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return undefined;
  }
}

/**
 * A `require` that resolves as this file does, in either build: the ES
 * modules have no `require` and the CommonJS copy cannot hold `import.meta`,
 * but in both V8 names the file a call site is in.
 */
function requireFromHere(): NodeJS.Require | undefined {
  const prepare = Error.prepareStackTrace;
  try {
    Error.prepareStackTrace = (_error, sites) => sites;
    const file = (new Error().stack as unknown as NodeJS.CallSite[])[0]?.getFileName();
    return file ? createRequire(file) : undefined;
  } catch {
    return undefined;
  } finally {
    Error.prepareStackTrace = prepare;
  }
}
