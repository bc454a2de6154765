import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';

export type PaymentStatus = 'pending' | 'captured' | 'declined';

@Entity({ name: 'payments' })
export class Payment {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column('text')
  tenant: string;

  @Column('uuid', { name: 'order_id' })
  orderId: string;

  @Column('integer', { name: 'amount_cents' })
  amountCents: number;

  @Column('text')
  currency: string;

  @Column('text')
  status: PaymentStatus;

  @Column('text', { name: 'provider_charge_id', nullable: true })
  providerChargeId: string | null;

  @CreateDateColumn({ type: 'timestamptz', name: 'created_at' })
  createdAt: Date;

  @Column('timestamptz', { name: 'captured_at', nullable: true })
  capturedAt: Date | null;
}

/** The JSON shape of a payment. */
export interface PaymentView {
  id: string;
  orderId: string;
  tenant: string;
  amountCents: number;
  currency: string;
  status: PaymentStatus;
  providerChargeId: string | null;
  createdAt: string;
  capturedAt: string | null;
}

export function toPaymentView(payment: Payment): PaymentView {
  const { id, orderId, tenant, amountCents, currency, status, providerChargeId, createdAt, capturedAt } = payment;
  return { id, orderId, tenant, amountCents, currency, status, providerChargeId, createdAt: createdAt.toISOString(), capturedAt: capturedAt?.toISOString() ?? null };
}
