#!/usr/bin/env node
import 'reflect-metadata';
import { runCli } from './cli.js';

// `npx nest-idempotency …`: the package's bin. Its exit code is the answer for scripts (see EXIT).
// A promise rather than a top-level await, which the CommonJS build cannot hold.
void runCli(process.argv.slice(2), process.env, {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
}).then((code) => {
  process.exitCode = code;
});
