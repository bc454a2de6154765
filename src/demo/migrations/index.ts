import { CreateOrders1764400001000 } from './1764400001000-CreateOrders.js';
import { CreatePayments1764400003000 } from './1764400003000-CreatePayments.js';
import { CreateShipments1764400005000 } from './1764400005000-CreateShipments.js';
import { CreateOrderExecutions1764400007000 } from './1764400007000-CreateOrderExecutions.js';

/** The demo's own tables; the demo runs them after the package's migrations. */
export const demoMigrations = [CreateOrders1764400001000, CreatePayments1764400003000, CreateShipments1764400005000, CreateOrderExecutions1764400007000];
