import { getDataSourceToken } from '@nestjs/typeorm';
import { readFileSync } from 'node:fs';
import Module, { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { DataSource } from 'typeorm';

/**
 * Runs before each suite of the `typeorm-0.3` project (vitest.config.ts):
 * proves that the suite, the module's sources and @nestjs/typeorm all load
 * TypeORM 0.3, or the suite would prove nothing about it. @nestjs/typeorm's
 * token of the default DataSource is the DataSource class it imported.
 *
 * typeorm-transactional is CommonJS, loaded by Node, where Vite's alias
 * does not reach its `require('typeorm')`: that one is sent to typeorm-0.3
 * here, so that the library patches the TypeORM the suite runs on
 * (test/faithful-transaction/transaction-libraries.e2e-spec.ts checks it).
 */
const require = createRequire(import.meta.url);
const expected = require('typeorm-0.3') as typeof import('typeorm');
// Its exports map leaves package.json out.
const { version } = JSON.parse(readFileSync(join(dirname(require.resolve('typeorm-0.3')), 'package.json'), 'utf8')) as { version: string };

if (!/^0\.3\./.test(version)) throw new Error(`the typeorm-0.3 devDependency is TypeORM ${version}`);
if (DataSource !== expected.DataSource) throw new Error('import "typeorm" does not load the typeorm-0.3 devDependency');
if (getDataSourceToken() !== expected.DataSource) throw new Error('@nestjs/typeorm does not load the typeorm-0.3 devDependency');

type Resolve = (request: string, parent: { filename?: string } | undefined, ...rest: unknown[]) => string;
const modules = Module as unknown as { _resolveFilename: Resolve };
const resolve = modules._resolveFilename;
modules._resolveFilename = function (request, parent, ...rest) {
  const fromLibrary = request === 'typeorm' && parent?.filename?.includes('/node_modules/typeorm-transactional/');
  return resolve.call(this, fromLibrary ? 'typeorm-0.3' : request, parent, ...rest);
};
