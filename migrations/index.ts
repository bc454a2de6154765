import { CreateIdempotencyRecords1764400000000 } from './1764400000000-CreateIdempotencyRecords.js';
import { CreateOrders1764400001000 } from './1764400001000-CreateOrders.js';

/** Every migration, in order; the app runs them at startup. */
export const migrations = [CreateIdempotencyRecords1764400000000, CreateOrders1764400001000];
