// The example app's service of orders, for snippets that use one without defining it.
export declare class OrdersService { create(...args: unknown[]): Promise<Order> }
