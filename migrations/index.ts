import { CreateIdempotencyRecords1764400000000 } from './1764400000000-CreateIdempotencyRecords.js';
import { CreateOrders1764400001000 } from './1764400001000-CreateOrders.js';
import { AddLeasesAndRecoveryPoints1764400002000 } from './1764400002000-AddLeasesAndRecoveryPoints.js';
import { CreatePayments1764400003000 } from './1764400003000-CreatePayments.js';
import { HotOutcomeUpdates1764400004000 } from './1764400004000-HotOutcomeUpdates.js';

/** Every migration, in order; the app runs them at startup. */
export const migrations = [
  CreateIdempotencyRecords1764400000000,
  CreateOrders1764400001000,
  AddLeasesAndRecoveryPoints1764400002000,
  CreatePayments1764400003000,
  HotOutcomeUpdates1764400004000,
];
