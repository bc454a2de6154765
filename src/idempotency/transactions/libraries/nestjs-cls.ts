import type { ModulesContainer } from '@nestjs/core';
import type { DataSource, EntityManager } from 'typeorm';
import { type IsolationLevel, isAtLeast, isolationLevelOf } from '../../options/idempotency.options.js';
import { dataSourceOf } from '../typeorm-internals.js';
import { wrapMethod } from '../wrap-method.js';
import type { LibraryJoin, Outside } from './library-join.js';

type Plugin = Pick<typeof import('@nestjs-cls/transactional'), 'TransactionHost' | 'Propagation'>;
type Host = InstanceType<Plugin['TransactionHost']>;
/** Where the plugin keeps its adapter's options, `defaultTxOptions` among them (a private field). */
type HostOptions = { _options?: { defaultTxOptions?: { isolationLevel?: unknown } } };

/**
 * Joins @nestjs-cls/transactional where the app runs it on the served
 * DataSource (its TypeORM adapter): a `Propagation.RequiresNew` transaction
 * runs `outside()` the request, a transaction of its own on another pool
 * connection that commits or rolls back by itself, as without the module.
 *
 * Every other mode runs as before: `Required` with no transaction of the
 * plugin's open calls `dataSource.transaction()`, which joins the request's
 * transaction as a savepoint (so a failure it throws undoes its writes
 * only, as its own transaction would), and inside one it runs inline, as
 * the plugin runs it. The plugin has no commit hooks.
 *
 * The join's `isolation` is the adapter's `defaultTxOptions.isolationLevel`
 * (the strictest, where several hosts serve the DataSource): each such
 * savepoint asks for it, and one above the request's level is refused, so
 * the request starts there.
 *
 * It wraps `withTransaction()` on the plugin's TransactionHost instances,
 * through which its `@Transactional` decorator goes too
 * (`TransactionHost.getInstance()`), with the propagation as its first
 * argument where the call names one, and reads the host's adapter options
 * (a private field, `_options`); `nestjs-cls.contract.spec.ts` pins both
 * down.
 *
 * @returns undefined where the app does not run the plugin on `dataSource`.
 */
export async function joinNestjsCls(modules: ModulesContainer, dataSource: DataSource, outside: Outside): Promise<LibraryJoin | undefined> {
  const found = await hostsOn(modules, dataSource);
  if (!found || found.hosts.length === 0) return undefined;
  const { RequiresNew } = found.plugin.Propagation;
  const undo = found.hosts.map((host) =>
    wrapMethod(host, 'withTransaction', (withTransaction) =>
      function (this: Host, ...args: unknown[]) {
        return args[0] === RequiresNew ? outside(() => withTransaction.apply(this, args)) : withTransaction.apply(this, args);
      },
    ),
  );
  return { isolation: strictestDefault(found.hosts), undo: () => undo.forEach((putBack) => putBack()) };
}

/** The strictest of the hosts' `defaultTxOptions.isolationLevel`; undefined where none sets one. */
function strictestDefault(hosts: Host[]): IsolationLevel | undefined {
  let strictest: IsolationLevel | undefined;
  for (const host of hosts) {
    const level = isolationLevelOf((host as unknown as HostOptions)._options?.defaultTxOptions?.isolationLevel);
    if (level && (!strictest || isAtLeast(level, strictest))) strictest = level;
  }
  return strictest;
}

/** The plugin's TransactionHost providers whose adapter runs on `dataSource`; undefined where the plugin is not installed. */
async function hostsOn(modules: ModulesContainer, dataSource: DataSource): Promise<{ plugin: Plugin; hosts: Host[] } | undefined> {
  const plugin: Plugin | undefined = await import('@nestjs-cls/transactional').catch(() => undefined);
  if (!plugin) return undefined;
  const hosts = new Set<Host>();
  for (const module of modules.values()) {
    for (const provider of module.providers.values()) {
      const instance: unknown = provider.instance;
      if (instance instanceof plugin.TransactionHost && servesOn(instance, dataSource)) hosts.add(instance);
    }
  }
  return { plugin, hosts: [...hosts] };
}

/** Outside a transaction a host's `tx` is its adapter's fallback: the DataSource's manager, for the TypeORM adapter. */
function servesOn(host: Host, dataSource: DataSource): boolean {
  const tx: unknown = host.tx;
  return typeof tx === 'object' && tx !== null && dataSourceOf(tx as EntityManager) === dataSource;
}
