/** The event an order's creation publishes, with the order's JSON view as payload and its id as ordering key. */
export const ORDER_CREATED = 'order.created';
/** The event a captured payment publishes. */
export const PAYMENT_CAPTURED = 'payment.captured';
