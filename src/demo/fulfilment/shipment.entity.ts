import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';

@Entity({ name: 'shipments' })
export class Shipment {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column('uuid', { name: 'order_id' })
  orderId: string;

  @Column('text')
  tenant: string;

  @CreateDateColumn({ type: 'timestamptz', name: 'created_at' })
  createdAt: Date;
}

/** The JSON shape of a shipment. */
export interface ShipmentView {
  id: string;
  orderId: string;
  createdAt: string;
}

export function toShipmentView(shipment: Shipment): ShipmentView {
  return { id: shipment.id, orderId: shipment.orderId, createdAt: shipment.createdAt.toISOString() };
}
