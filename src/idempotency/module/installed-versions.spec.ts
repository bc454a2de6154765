import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { installedVersions, satisfies, SUPPORTED_PEERS } from './installed-versions.js';

const manifestOf = (dir: string) => JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));

describe('the peers the module checks at startup', () => {
  it('are supported in the ranges package.json declares', () => {
    const { peerDependencies } = manifestOf(process.cwd());
    for (const [name, range] of Object.entries(SUPPORTED_PEERS)) expect({ name, range }).toEqual({ name, range: peerDependencies[name] });
  });

  it('are found at the versions installed (test/dual-build.e2e-spec.ts finds them from both builds)', () => {
    const expected = Object.fromEntries(Object.keys(SUPPORTED_PEERS).map((name) => [name, manifestOf(join('node_modules', name)).version]));
    expect(installedVersions()).toEqual(expected);
  });

  it.each([
    ['10.0.0', SUPPORTED_PEERS['@nestjs/common'], true],
    ['11.2.10', SUPPORTED_PEERS['@nestjs/common'], true],
    ['12.5.1', SUPPORTED_PEERS['@nestjs/common'], true],
    ['9.4.3', SUPPORTED_PEERS['@nestjs/common'], false],
    ['13.0.0', SUPPORTED_PEERS['@nestjs/common'], false],
    ['12.0.0-next.1', SUPPORTED_PEERS['@nestjs/common'], false],
    ['0.3.0', SUPPORTED_PEERS.typeorm, true],
    ['0.3.31', SUPPORTED_PEERS.typeorm, true],
    ['1.1.1', SUPPORTED_PEERS.typeorm, true],
    ['0.2.45', SUPPORTED_PEERS.typeorm, false],
    ['0.4.0', SUPPORTED_PEERS.typeorm, false],
    ['2.0.0', SUPPORTED_PEERS.typeorm, false],
    ['1.0.0-dev.20250101', SUPPORTED_PEERS.typeorm, false],
  ])('reads %s as in %s: %s', (version, range, expected) => {
    expect(satisfies(version, range)).toBe(expected);
  });

  it('refuses a range it does not read, rather than guess', () => {
    expect(() => satisfies('1.0.0', '>=1.0.0')).toThrow(/caret ranges/);
  });
});
