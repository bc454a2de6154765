import { Command, CommanderError, Option } from 'commander';
import { tenantScope } from '../admin/admin-access.js';
import { AdminProblemType, AdminRefusedException } from '../admin/admin.exceptions.js';
import type { IdempotencyAdmin } from '../admin/idempotency-admin.js';
import type { AdminCaller, AdminPage } from '../admin/admin.types.js';
import { adminActionLine } from '../admin/admin-action-line.js';
import { type CliEnvironment, connectAdmin, defaultActor, UsageError } from './cli-admin.js';
import { parseInstant, parseRetention } from './cli-arguments.js';
import { releaseFromCli } from './cli-release.js';
import { type CliStreams, EVENT_COLUMNS, RECORD_COLUMNS, UNFINISHED_COLUMNS, writePage, writeRecord, writeResult } from './cli-output.js';
import { cliProblem, CliProblemType } from './cli-problem.js';
import { jsonText, terminalText } from './terminal-text.js';

/** The CLI's exit codes, for scripts. */
export const EXIT = {
  /** Done, or found. */
  done: 0,
  /** Failed: the database could not be reached, or something unexpected. */
  failed: 1,
  /** Called wrongly: an unknown option, a missing reason, a malformed id, instant or retention, DATABASE_URL unset, no module tables there. */
  usage: 2,
  /** Nothing found: an empty list (0 with --empty-ok), no such record. */
  nothing: 3,
  /** Refused: the action would break the guarantee (a live lease, a release that needs --force, a key in use, an out-of-order requeue). */
  refused: 4,
} as const;

interface ScopeOptions {
  tenant?: string;
  scope?: string;
}

interface ActionOptions extends ScopeOptions {
  operation?: string;
  reason: string;
  as?: string;
}

/** The CLI's caller: every scope, acting as `--as` (by default the user running it). */
const callerOf = (as: string | undefined): AdminCaller => ({ actor: as ?? defaultActor(), scopes: 'all' });

/**
 * Runs `nest-idempotency <command>` on `DATABASE_URL` and answers its exit
 * code (`EXIT`): records (`inspect`), unfinished phased operations
 * (`unfinished`), the outbox's dead letters (`dead-letters`), and the
 * actions `requeue`, `release` and `fail`, each with a required `--reason`.
 * `--json` writes the answer, or the problem, as JSON on standard output;
 * audit lines and messages go to standard error, with the control characters
 * of stored text escaped.
 */
export async function runCli(args: readonly string[], env: CliEnvironment, streams: CliStreams): Promise<number> {
  let code: number = EXIT.done;
  const program = new Command('nest-idempotency')
    .description('Inspect and act on idempotency records, unfinished phased operations and outbox dead letters, on DATABASE_URL.')
    .option('--json', 'answer in JSON on standard output, for scripts')
    .option('--schema <name>', "the schema of the module's tables (default: where DATABASE_URL's search_path finds idempotency_records)")
    .option('--empty-ok', 'a list that finds nothing exits 0 rather than 3, for monitoring that reads the list')
    .addHelpText('after', `\nExit codes: 0 done or found, 1 failed, 2 called wrongly, 3 nothing found, 4 refused.\nIDEMPOTENCY_ENCRYPTION_KEYS="id:base64key,..." (the app's keys, first sealing) opens sealed answers.`)
    .exitOverride()
    .configureOutput({ writeOut: (text) => streams.out(text.trimEnd()), writeErr: (text) => streams.err(text.trimEnd()) });
  const json = () => Boolean(program.opts().json);
  /** A list's exit code: 3 for nothing found, unless --empty-ok. */
  const listed = (page: AdminPage<unknown>) => (page.items.length > 0 || program.opts().emptyOk ? EXIT.done : EXIT.nothing);

  /** Runs `work` with the admin connected, and turns what it throws into an exit code and a message. */
  const withAdmin = (work: (admin: IdempotencyAdmin) => Promise<number>, retentionMs?: number) => async () => {
    try {
      const cli = await connectAdmin(env, retentionMs, (event) => streams.err(terminalText(adminActionLine(event))), program.opts().schema);
      try {
        code = await work(cli.admin);
      } finally {
        await cli.close();
      }
    } catch (error) {
      code = failure(error, streams, json());
    }
  };

  program
    .command('inspect')
    .description('Find records, newest claim first; with a key, its tenant (or scope) and operation, show that record in full')
    .argument('[key]', 'the idempotency key')
    .addOption(new Option('--tenant <tenant>', 'the tenant, as the app resolves it').conflicts('scope'))
    .option('--scope <scope>', 'the scope as stored, e.g. tenant:acme or anonymous')
    .option('--operation <operation>', 'e.g. "POST /orders"')
    .addOption(new Option('--status <status>').choices(['in_progress', 'completed', 'failed']))
    .option('--since <instant>', 'claimed at or after (ISO 8601; without a zone, UTC)', parseInstant)
    .option('--until <instant>', 'claimed before (ISO 8601; without a zone, UTC)', parseInstant)
    .option('--limit <n>', 'records per page, 1 to 200', Number)
    .option('--cursor <cursor>', 'the page after this one, as a previous run printed it')
    .action((key: string | undefined, options: ScopeOptions & { operation?: string; status?: 'completed'; since?: Date; until?: Date; limit?: number; cursor?: string }) =>
      withAdmin(async (admin) => {
        const scope = scopeOf(options);
        const caller = callerOf(undefined);
        if (key && scope && options.operation) {
          writeRecord(streams, await admin.record({ scope, operation: options.operation, key }, caller), json());
          return EXIT.done;
        }
        const query = { key, scope, operation: options.operation, status: options.status, since: options.since, until: options.until, limit: options.limit, cursor: options.cursor };
        const page = await admin.findRecords(query, caller);
        writePage(streams, page, RECORD_COLUMNS, json());
        return listed(page);
      })(),
    );

  program
    .command('unfinished')
    .description('Phased operations that started and never finished, the longest lapsed lease first')
    .addOption(new Option('--tenant <tenant>').conflicts('scope'))
    .option('--scope <scope>')
    .option('--operation <operation>')
    .option('--limit <n>', 'operations per page, 1 to 200', Number)
    .option('--cursor <cursor>')
    .action((options: ScopeOptions & { operation?: string; limit?: number; cursor?: string }) =>
      withAdmin(async (admin) => {
        const page = await admin.unfinished({ scope: scopeOf(options), operation: options.operation, limit: options.limit, cursor: options.cursor }, callerOf(undefined));
        writePage(streams, page, UNFINISHED_COLUMNS, json());
        return listed(page);
      })(),
    );

  program
    .command('dead-letters')
    .description('Outbox events the relay gave up on, oldest first (--pending: those waiting for the relay)')
    .option('--pending', 'list pending events instead')
    .option('--limit <n>', 'events per page, 1 to 200', Number)
    .option('--cursor <cursor>')
    .action((options: { pending?: boolean; limit?: number; cursor?: string }) =>
      withAdmin(async (admin) => {
        const page = await admin.outboxEvents({ state: options.pending ? 'pending' : 'dead', limit: options.limit, cursor: options.cursor }, callerOf(undefined));
        writePage(streams, page, EVENT_COLUMNS, json());
        return listed(page);
      })(),
    );

  program
    .command('requeue')
    .description('Put dead letters back in line, by id or all; older dead letters of their ordering keys must come along')
    .argument('[ids...]', 'event ids, as dead-letters lists them')
    .option('--all', 'every dead letter')
    .requiredOption('--reason <text>', 'why: recorded with who asked')
    .option('--as <name>', 'who asks (default: the user running the CLI)')
    .action((ids: string[], options: { all?: boolean; reason: string; as?: string }) =>
      withAdmin(async (admin) => {
        if (options.all === (ids.length > 0)) throw new UsageError('Name the dead letters to requeue, or pass --all (not both).');
        writeResult(streams, await admin.requeueDead(options.all ? 'all' : ids, callerOf(options.as), options.reason), json());
        return EXIT.done;
      })(),
    );

  for (const [name, description] of [
    ['release', 'Free a key: delete its record; one whose run may have had external effects (phases, outbox events) only with --force'],
    ['fail', 'Mark an unfinished phased operation whose lease lapsed as failed'],
  ] as const) {
    program
      .command(name)
      .description(description)
      .argument('<key>', 'the idempotency key')
      .addOption(new Option('--tenant <tenant>').conflicts('scope'))
      .option('--scope <scope>')
      .requiredOption('--operation <operation>', 'e.g. "POST /orders"')
      .requiredOption('--reason <text>', 'why: recorded with who asked')
      .option('--as <name>', 'who asks (default: the user running the CLI)')
      .option('--force', 'release: even a record whose run may have had external effects, which a retry does again (said first)')
      .option('--retention <ms>', 'fail: how long the failure replays when the claim stored no retention of its own (default 24 h, at most 365 days)', parseRetention)
      .action((key: string, options: ActionOptions & { force?: boolean; retention?: number }) =>
        withAdmin(async (admin) => {
          const scope = scopeOf(options);
          if (!scope) throw new UsageError('Name the key\'s --tenant, or its --scope (anonymous for keys without a tenant).');
          const id = { scope, operation: options.operation!, key };
          const result =
            name === 'release'
              ? await releaseFromCli(admin, streams, id, { caller: callerOf(options.as), reason: options.reason, force: Boolean(options.force) })
              : await admin.markFailed(id, callerOf(options.as), options.reason);
          writeResult(streams, result, json());
          return EXIT.done;
        }, options.retention)(),
      );
  }

  try {
    await program.parseAsync(args, { from: 'user' });
  } catch (error) {
    if (!(error instanceof CommanderError)) throw error;
    if (error.exitCode === 0) return EXIT.done;
    if (json()) streams.out(jsonText(cliProblem(error)));
    return EXIT.usage;
  }
  return code;
}

function scopeOf({ tenant, scope }: ScopeOptions): string | undefined {
  return tenant !== undefined ? tenantScope(tenant) : scope;
}

/** The exit code of what a command threw, said on standard error (and as a problem on standard output with --json). */
function failure(error: unknown, streams: CliStreams, json: boolean): number {
  if (error instanceof AdminRefusedException) {
    const { type, title, detail } = error.problem;
    if (json) streams.out(jsonText(error.problem));
    streams.err(terminalText(`${title}: ${detail}`));
    if (type === AdminProblemType.NotFound) return EXIT.nothing;
    return type === AdminProblemType.BadRequest ? EXIT.usage : EXIT.refused;
  }
  const problem = cliProblem(error);
  if (json) streams.out(jsonText(problem));
  streams.err(terminalText(problem.detail));
  return problem.type === CliProblemType.Usage ? EXIT.usage : EXIT.failed;
}
