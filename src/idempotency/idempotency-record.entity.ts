import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/** `in_progress` is only ever seen inside the owner's transaction or while it waits to commit. */
export type IdempotencyRecordStatus = 'in_progress' | 'completed';

/**
 * One idempotency key of one tenant scope and operation, and the outcome it
 * replays until `expiresAt`. The migration in `migrations/` creates the table;
 * the module writes it with its own SQL and never through `synchronize`.
 */
@Entity({ name: 'idempotency_records' })
export class IdempotencyRecord {
  /** The tenant (and route version) the key belongs to. */
  @PrimaryColumn('text')
  scope: string;

  /** e.g. `POST /orders/:id/payments`. */
  @PrimaryColumn('text')
  operation: string;

  @PrimaryColumn('text')
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

  @Column('timestamptz', { name: 'created_at' })
  createdAt: Date;

  @Column('timestamptz', { name: 'completed_at', nullable: true })
  completedAt: Date | null;

  @Index('idempotency_records_expires_at_idx')
  @Column('timestamptz', { name: 'expires_at' })
  expiresAt: Date;
}
