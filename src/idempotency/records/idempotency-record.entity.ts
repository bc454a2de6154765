import { Check, Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * `in_progress`: claimed. Outside a phased operation it never commits, so
 * only the owner's transaction sees it. `failed`: a phased operation that
 * could not be completed; its failure is the outcome every retry sees.
 */
export type IdempotencyRecordStatus = 'in_progress' | 'completed' | 'failed';

/** The primary key, (scope, operation, key), as the migration names it too: a unique violation of it is a key held (see `isKeyHeldAtCommit`). */
export const RECORDS_PRIMARY_KEY = 'idempotency_records_pkey';

/**
 * One idempotency key of one tenant scope and operation, and the outcome it
 * replays until `expiresAt`. The migration `CreateIdempotencyRecords1764400000000`
 * (in `idempotencyMigrations`) creates the table; the module writes it with
 * its own SQL. These decorators describe that table exactly (constraint and
 * index names, defaults, the partial lease index), so that `synchronize` and
 * `migration:generate` find nothing to change once the migration has run.
 *
 * The table's `fillfactor = 90` has no decorator: TypeORM neither reads nor
 * compares storage parameters, so the schema builder leaves it as it is.
 */
@Entity({ name: 'idempotency_records' })
@Index('idempotency_records_lease_idx', ['leaseExpiresAt'], { where: 'lease_expires_at IS NOT NULL' })
@Check('idempotency_records_status_check', `status IN ('in_progress', 'completed', 'failed')`)
@Check('idempotency_records_outcome_chk', `status = 'in_progress' OR response_status IS NOT NULL`)
export class IdempotencyRecord {
  /** The tenant (and route version) the key belongs to. */
  @PrimaryColumn('text', { primaryKeyConstraintName: RECORDS_PRIMARY_KEY })
  scope: string;

  /** e.g. `POST /orders/:id/payments`. */
  @PrimaryColumn('text', { primaryKeyConstraintName: RECORDS_PRIMARY_KEY })
  operation: string;

  @PrimaryColumn('text', { primaryKeyConstraintName: RECORDS_PRIMARY_KEY })
  key: string;

  /** SHA-256 hex of the canonical request fields. */
  @Column('text')
  fingerprint: string;

  @Column('text')
  status: IdempotencyRecordStatus;

  @Column('smallint', { name: 'response_status', nullable: true })
  responseStatus: number | null;

  @Column('jsonb', { name: 'response_headers', nullable: true })
  responseHeaders: Record<string, string> | null;

  /** The exact text sent, so that a replay is byte-identical (jsonb would reorder keys). */
  @Column('text', { name: 'response_body', nullable: true })
  responseBody: string | null;

  /** Indexed by the migration `AddIdempotencyAdminIndexes1764400020000`, for the admin's lists. */
  @Index('idempotency_records_created_at_idx')
  @Column('timestamptz', { name: 'created_at', default: () => 'now()' })
  createdAt: Date;

  @Column('timestamptz', { name: 'completed_at', nullable: true })
  completedAt: Date | null;

  @Index('idempotency_records_expires_at_idx')
  @Column('timestamptz', { name: 'expires_at' })
  expiresAt: Date;

  /** The current owner of a phased operation's lease; a stale owner's writes match no row. */
  @Column('uuid', { name: 'owner_token', nullable: true })
  ownerToken: string | null;

  @Column('timestamptz', { name: 'lease_expires_at', nullable: true })
  leaseExpiresAt: Date | null;

  /** The last finished phase. */
  @Column('text', { name: 'recovery_point', nullable: true })
  recoveryPoint: string | null;

  /** Each finished phase's result, by phase name. */
  @Column('jsonb', { name: 'phase_results', default: {} })
  phaseResults: Record<string, unknown>;

  /** The phased operation and its input, so the reaper can finish it without a client. */
  @Column('jsonb', { nullable: true })
  resume: unknown;

  /** How many owners have held the claim. */
  @Column('integer', { default: 1 })
  attempts: number;

  @Column('text', { name: 'failure_reason', nullable: true })
  failureReason: string | null;
}
