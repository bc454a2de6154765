import { Inject, Injectable } from '@nestjs/common';
import { retriedOnLostConnection } from '../driver/database-errors.js';
import type { ResolvedModuleOptions } from '../options/idempotency.options.js';
import { RESOLVED_IDEMPOTENCY_OPTIONS } from '../options/idempotency.tokens.js';
import { IdempotencyDataSource } from '../transactions/idempotency-data-source.js';
import { describeRecordsTable, type ModuleTables, moduleTablesIn, type RecordsTableDescription } from './module-tables.js';


/**
 * Where the module's tables are, for every statement it sends: in the
 * `schema` option, or else in the schema where the served DataSource's
 * search_path found `idempotency_records` at startup. The catalog is read
 * once, by whichever startup check asks first (`describe()`), and each set of
 * statements is built on the names once per app (`of()`): two apps in one
 * process may use different schemas.
 *
 * @example
 * this.tables.of(IdempotencyStatements).readRecord(id)
 */
@Injectable()
export class IdempotencyTables {
  private described?: Promise<RecordsTableDescription>;
  private found?: ModuleTables;
  private readonly built = new Map<new (tables: ModuleTables) => unknown, unknown>();

  constructor(
    private readonly served: IdempotencyDataSource,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  /** `idempotency_records` as the catalog has it, read once; the tables are named after the schema it is in. */
  describe(): Promise<RecordsTableDescription> {
    return (this.described ??= this.read().then((table) => {
      if (table.schema !== null) this.found = moduleTablesIn(table.schema);
      return table;
    }));
  }

  /** The tables' qualified names, known once the startup check found the table. */
  get names(): ModuleTables {
    if (!this.found) throw new Error('IdempotencyModule has not found its tables yet: they are looked up when the application initialises (app.init(), app.listen()).');
    return this.found;
  }

  /** `Statements` built on these tables: once per app, so that texts and prepared statements' names are computed once. */
  of<T>(Statements: new (tables: ModuleTables) => T): T {
    let statements = this.built.get(Statements) as T | undefined;
    if (!statements) this.built.set(Statements, (statements = new Statements(this.names)));
    return statements;
  }

  /** A connection lost meanwhile (a restart, a terminated backend) is retried, so it does not fail the boot. */
  private read(): Promise<RecordsTableDescription> {
    const dataSource = this.served.dataSource;
    return retriedOnLostConnection(() => describeRecordsTable((text, values) => dataSource.query(text, values), this.options.schema));
  }
}
