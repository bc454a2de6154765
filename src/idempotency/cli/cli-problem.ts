import { CommanderError } from 'commander';
import { CreateIdempotencyOutbox1764400010000 } from '../../../migrations/1764400010000-CreateIdempotencyOutbox.js';
import { IdempotencyConfigurationError } from '../errors/idempotency.exceptions.js';
import { runTheMigration, UsageError } from './cli-admin.js';

/** Stable RFC 9457 problem `type` URIs of the CLI's own failures, which `--json` prints as it prints the admin's refusals. */
export const CliProblemType = {
  /** Exit 2: called wrongly (an option, its value, DATABASE_URL unset), or on a database or schema without the module's tables. */
  Usage: 'urn:nest-idempotency:problem:cli-usage',
  /** Exit 1: the database could not be reached, or something unexpected. */
  Failed: 'urn:nest-idempotency:problem:cli-failed',
} as const;

/** A failure of the CLI's own as problem details: no `status`, there being no HTTP exchange; the exit code says it. */
export interface CliProblem {
  type: (typeof CliProblemType)[keyof typeof CliProblemType];
  title: string;
  detail: string;
}

/** PostgreSQL's undefined_table. */
const UNDEFINED_TABLE = '42P01';

/**
 * What went wrong, other than an admin refusal, as a problem: so that a
 * script reading `--json` gets a document for every failure, from a
 * mistyped option to a database it cannot reach.
 */
export function cliProblem(error: unknown): CliProblem {
  if (error instanceof CommanderError) {
    // Commander has said it on standard error already; without a command, what it said is the help.
    return usage(error.code === 'commander.help' ? 'Name a command: --help lists them.' : error.message.replace(/^error: /, ''));
  }
  if (error instanceof UsageError || error instanceof IdempotencyConfigurationError) return usage(error.message);
  const { message, code, errors } = (error ?? {}) as { message?: string; code?: string; errors?: Array<{ message?: string }> };
  // The CLI found idempotency_records before it ran anything, so a table missing now is the outbox, whose migration is a separate one.
  if (code === UNDEFINED_TABLE && message?.includes('idempotency_outbox')) return usage(`${message}: ${runTheMigration(CreateIdempotencyOutbox1764400010000)}.`);
  // Node's AggregateError of a connection refused on each address the host has holds their messages, and none of its own.
  return { type: CliProblemType.Failed, title: 'The CLI failed', detail: message || errors?.map((each) => each.message).join('; ') || String(error) };
}

function usage(detail: string): CliProblem {
  return { type: CliProblemType.Usage, title: 'The CLI was called wrongly', detail };
}
