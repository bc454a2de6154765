import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';

/** An event written in the same transaction as the change it announces, for a relay to publish. */
@Entity({ name: 'outbox_events' })
export class OutboxEvent {
  @PrimaryGeneratedColumn('identity', { type: 'bigint', generatedIdentity: 'ALWAYS' })
  id: string;

  @Column('text')
  tenant: string;

  @Column('text', { name: 'event_type' })
  type: string;

  @Column('uuid', { name: 'aggregate_id' })
  aggregateId: string;

  @Column('jsonb')
  payload: unknown;

  @CreateDateColumn({ type: 'timestamptz', name: 'created_at' })
  createdAt: Date;

  @Column('timestamptz', { name: 'published_at', nullable: true })
  publishedAt: Date | null;
}
