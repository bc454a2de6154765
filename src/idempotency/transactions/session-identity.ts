import type { OwnQuery } from './commit-scoped-state.js';

/**
 * The role the request's connection runs as, where the handler's code
 * changes it (`SET ROLE`, `SET SESSION AUTHORIZATION`, `RESET ROLE`): the
 * module's record is written at COMMIT as the role the claim ran as, which
 * is the one the module's tables are granted to. The app's change stays
 * the connection's once the request has committed, as it would have
 * without the module; the record's own is `LOCAL`, and ends with COMMIT.
 */
export class SessionIdentity {
  private saved?: Promise<{ role: string; authorization: string }>;

  /** Reads the role before the first statement of the handler's that changes it; once a request. */
  async before(query: OwnQuery): Promise<void> {
    this.saved ??= query(`SELECT current_setting('role') AS role, current_setting('session_authorization') AS authorization`).then(
      ([row]) => row as { role: string; authorization: string },
    );
    await this.saved;
  }

  /** The statement that puts back the role the claim ran as, for the rest of the transaction; undefined where the handler never changed it. */
  restoring(): Promise<string | undefined> {
    return this.saved
      ? this.saved.then(({ role, authorization }) => `SELECT set_config('session_authorization', ${literal(authorization)}, true), set_config('role', ${literal(role)}, true)`)
      : Promise.resolve(undefined);
  }
}

function literal(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}
