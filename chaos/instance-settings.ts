/** The instances' lease: short, so that a dead owner's claims lapse within a run. */
export const LEASE_MS = 2000;
export const REAPER_INTERVAL_MS = 1000;
export const PROVIDER_TIMEOUT_MS = 1500;
/** After a fault ends, a dead owner's lease must lapse and a reaper pass run before errors stop being its doing. */
export const GRACE_MS = LEASE_MS + REAPER_INTERVAL_MS;
/** Lease, one reaper interval, and room for a resumed charge to time out once more. */
export const SETTLE_MS = LEASE_MS + REAPER_INTERVAL_MS + PROVIDER_TIMEOUT_MS + 1000;
export const VERIFY_CONCURRENCY = 16;
/** How long delivery may take to drain once the faults are off. */
export const DELIVERY_SETTLE_TIMEOUT_MS = 90_000;

/** The environment every demo instance of a chaos run gets, whatever its database. */
export const INSTANCE_SETTINGS = {
  IDEMPOTENCY_LEASE_MS: String(LEASE_MS),
  REAPER_INTERVAL_MS: String(REAPER_INTERVAL_MS),
  PAYMENT_PROVIDER_TIMEOUT_MS: String(PROVIDER_TIMEOUT_MS),
  // The demo's per-tenant rate limit would turn the load into 429s: off.
  TENANT_RATE_LIMIT: '0',
  DB_POOL_SIZE: '10',
  API_KEYS: 'demo-key-acme:acme,demo-key-globex:globex',
  HOST: '127.0.0.1',
};
