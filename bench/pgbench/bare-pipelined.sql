-- The bare transaction with BEGIN sent with the order: three round trips. Against bare.sql, what BEGIN sent
-- on its own costs.
-- Variables the runner passes with -D (see bench/README.md): tenant, sku, scope, operation, fingerprint,
-- retention_ms, wait, response_status, response_headers, response_body, event_type, payload, event_headers,
-- event_index, source_key_hash, notify (the phase, empty, is a literal: pgbench takes no empty -D). Every transaction uses a fresh key.
\set key random(1000000000000000000, 9223372036854775806)
\set lock_key hash_fnv1a(:key)
\set order_ref random(1000000000000000000, 9223372036854775806)
\set quantity 2
\startpipeline
BEGIN;
INSERT INTO "orders"("id", "tenant", "sku", "quantity", "note", "status", "created_at") VALUES (DEFAULT, :tenant, :sku, :quantity, NULL, DEFAULT, DEFAULT) RETURNING "id", "status", "created_at";
\endpipeline
WITH ordering AS MATERIALIZED (
  SELECT (SELECT count(*) FROM (SELECT pg_advisory_xact_lock(hashtextextended('idempotency_outbox:' || :order_ref, 0)) WHERE :order_ref::text IS NOT NULL) AS held) AS locks,
         (SELECT count(*) FROM (SELECT pg_notify('idempotency_outbox', '') WHERE :notify::boolean) AS sent) AS notified)
INSERT INTO "public".idempotency_outbox (id, type, payload, headers, ordering_key, source_key_hash)
SELECT gen_random_uuid(), :event_type, :payload::jsonb, :event_headers::jsonb, :order_ref, NULL FROM ordering
RETURNING id;
COMMIT;
