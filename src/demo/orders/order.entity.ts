import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';

@Entity({ name: 'orders' })
export class Order {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  /** Insertion order, for stable newest-first pagination. */
  @Column({ type: 'bigint', insert: false, update: false, select: false })
  seq: string;

  @Column('text')
  tenant: string;

  @Column('text')
  sku: string;

  @Column('integer')
  quantity: number;

  @Column('text', { nullable: true })
  note: string | null;

  @Column('text', { default: 'created' })
  status: string;

  @CreateDateColumn({ type: 'timestamptz', name: 'created_at' })
  createdAt: Date;
}

/** The JSON shape of an order. */
export interface OrderView {
  id: string;
  tenant: string;
  sku: string;
  quantity: number;
  note: string | null;
  status: string;
  createdAt: string;
}

export function toOrderView(order: Order): OrderView {
  const { id, tenant, sku, quantity, note, status, createdAt } = order;
  return { id, tenant, sku, quantity, note, status, createdAt: createdAt.toISOString() };
}
