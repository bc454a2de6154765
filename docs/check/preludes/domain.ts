// The example app's own classes, which some snippets of docs/ use without
// showing them (`<!-- snippet: prelude=domain -->`): declared, not defined.
import type { PhasedOperation as PhasedOperationShape } from 'nest-idempotency/phases';

export declare class Order { id: string; tenant: string; sku: string; quantity: number }
export declare class CreateOrderDto { sku: string; quantity: number }
export declare class CreateOrderInput { sku: string; quantity: number }
export declare class OrderView { id: string; tenant: string }
export declare class FulfilmentService { ship(order: OrderView): Promise<unknown> }
export declare class CreateAccountDto { name: string }
export declare class AccountsService { create(dto: CreateAccountDto): Promise<unknown> }
export declare class AlreadySettledException extends Error {}
export declare class NewPayment { tenant: string; orderId: string; amountCents: number }
export declare class CreatePaymentDto { amountCents: number }
export declare class PaymentView { id: string; orderId: string }
export declare class PaymentsService { recordPending(input: NewPayment): Promise<{ id: string }>; capture(id: string, chargeId: string): Promise<PaymentView> }
export declare class PaymentProviderClient { charge(request: { amountCents: number; reference: string }, key: string, signal: AbortSignal): Promise<{ id: string }> }
export declare class OrderLine { orderId: string }
export declare class ShiftsService { takeOffCall(id: string): Promise<unknown> }
export declare class MailQueue { flush(): Promise<void> }
export declare class Invoice { id: string; amountCents: number }
export declare class AuditEntry { action: string }
export declare function Tenant(): ParameterDecorator;
export type { PhasedOperationShape };
