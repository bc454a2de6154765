-- A first execution as the module sends it with unitSavepoints: false (guarded-first-units.sql has the savepoints):
-- BEGIN, the key's advisory lock and a read of its record in one write; the order and its outbox event (its id
-- derived from the key and the transaction's now()); the completed record with COMMIT in one write. Four round
-- trips, three statements more than bare.sql.
-- Variables the runner passes with -D (see bench/README.md): tenant, sku, scope, operation, fingerprint,
-- retention_ms, wait, response_status, response_headers, response_body, event_type, payload, event_headers,
-- event_index, source_key_hash, notify (the phase, empty, is a literal: pgbench takes no empty -D). Every transaction uses a fresh key.
\set key random(1000000000000000000, 9223372036854775806)
\set lock_key hash_fnv1a(:key)
\set order_ref random(1000000000000000000, 9223372036854775806)
\set quantity 2
\startpipeline
BEGIN;
SELECT pg_try_advisory_xact_lock(:lock_key::bigint) AS locked, now() AS database_now;
SELECT fingerprint, status, response_status, response_headers, response_body, expires_at, now() AS database_now, expires_at > clock_timestamp() AS live FROM "public".idempotency_records WHERE scope = :scope AND operation = :operation AND key = :key;
\endpipeline
INSERT INTO "orders"("id", "tenant", "sku", "quantity", "note", "status", "created_at") VALUES (DEFAULT, :tenant, :sku, :quantity, NULL, DEFAULT, DEFAULT) RETURNING "id", "status", "created_at";
WITH ordering AS MATERIALIZED (
  SELECT (SELECT count(*) FROM (SELECT pg_advisory_xact_lock(hashtextextended('idempotency_outbox:' || :order_ref, 0)) WHERE :order_ref::text IS NOT NULL) AS held) AS locks,
         (SELECT count(*) FROM (SELECT pg_notify('idempotency_outbox', '') WHERE :notify::boolean) AS sent) AS notified),
     source AS (
       SELECT encode(sha256(convert_to(concat_ws(E'\n', scope, operation, key, (extract(epoch FROM created_at) * 1000000)::bigint, ''::text, :event_index::int), 'UTF8')), 'hex') AS h
         FROM (SELECT :scope::text AS scope, :operation::text AS operation, :key::text AS key, now() AS created_at) AS r)
INSERT INTO "public".idempotency_outbox (id, type, payload, headers, ordering_key, source_key_hash)
SELECT (substr(h, 1, 12) || '8' || substr(h, 14, 3) || substr('89ab', ('x' || substr(h, 17, 1))::bit(4)::int % 4 + 1, 1) || substr(h, 18, 15))::uuid, :event_type, :payload::jsonb, :event_headers::jsonb, :order_ref, :source_key_hash FROM source, ordering
RETURNING id;
\startpipeline
INSERT INTO "public".idempotency_records (scope, operation, key, fingerprint, status, response_status, response_headers, response_body, created_at, completed_at, expires_at)
VALUES (:scope, :operation, :key, :fingerprint, 'completed', :response_status::smallint, :response_headers::jsonb, :response_body::text, now(), now(), now() + :retention_ms * interval '1 millisecond')
RETURNING false AS took_over, expires_at, now() AS database_now;
COMMIT;
\endpipeline
