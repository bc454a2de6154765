-- The claim by record, as above READ COMMITTED (it holds the key's advisory lock too): BEGIN with an in-progress record in one write, the
-- order and its outbox event (its id derived from the record), the record completed with COMMIT in one write (an
-- insert that meets the claim's row and updates it). The record is written twice.
-- Variables the runner passes with -D (see bench/README.md): tenant, sku, scope, operation, fingerprint,
-- retention_ms, wait, response_status, response_headers, response_body, event_type, payload, event_headers,
-- event_index, source_key_hash, notify (the phase, empty, is a literal: pgbench takes no empty -D). Every transaction uses a fresh key.
\set key random(1000000000000000000, 9223372036854775806)
\set lock_key hash_fnv1a(:key)
\set order_ref random(1000000000000000000, 9223372036854775806)
\set quantity 2
\startpipeline
BEGIN;
WITH wait AS MATERIALIZED (
       SELECT current_setting('lock_timeout') AS previous, set_config('lock_timeout', (CASE current_setting('statement_timeout') WHEN '0' THEN :wait::int
              ELSE (SELECT greatest(1, floor(least(:wait::int, greatest(ms * 0.75, ms - 50))))::int
                      FROM (SELECT date_part('epoch', current_setting('statement_timeout')::interval) * 1000 AS ms) AS statement_timeout) END)::text || 'ms', true) AS applied),
     locked AS MATERIALIZED (SELECT pg_advisory_xact_lock(:lock_key::bigint) FROM wait),
     claim AS (
       INSERT INTO "public".idempotency_records AS r
              (scope, operation, key, fingerprint, status, response_status, response_headers, response_body, created_at, completed_at, expires_at)
       SELECT :scope, :operation, :key, :fingerprint, 'in_progress', NULL::smallint, NULL::jsonb, NULL::text, now(), NULL::timestamptz, now() + :retention_ms * interval '1 millisecond' FROM locked
       ON CONFLICT (scope, operation, key) DO UPDATE
         SET fingerprint = EXCLUDED.fingerprint, status = EXCLUDED.status, response_status = EXCLUDED.response_status,
             response_headers = EXCLUDED.response_headers, response_body = EXCLUDED.response_body, created_at = EXCLUDED.created_at,
             completed_at = EXCLUDED.completed_at, expires_at = EXCLUDED.expires_at
         WHERE r.expires_at <= clock_timestamp() AND r.status <> 'in_progress'
       RETURNING (xmax <> 0) AS took_over, expires_at),
     found AS (
       SELECT true AS claimed, took_over, expires_at, NULL AS fingerprint, NULL AS status, NULL::smallint AS response_status,
              NULL::jsonb AS response_headers, NULL AS response_body
         FROM claim
       UNION ALL
       SELECT false, false, expires_at, fingerprint, status, response_status, response_headers, response_body
         FROM "public".idempotency_records
        WHERE scope = :scope AND operation = :operation AND key = :key AND expires_at > clock_timestamp() AND NOT EXISTS (SELECT 1 FROM claim))
SELECT found.*, now() AS database_now, set_config('lock_timeout', (SELECT previous FROM wait), true) AS lock_timeout
  FROM (SELECT) AS one LEFT JOIN found ON true;
\endpipeline
INSERT INTO "orders"("id", "tenant", "sku", "quantity", "note", "status", "created_at") VALUES (DEFAULT, :tenant, :sku, :quantity, NULL, DEFAULT, DEFAULT) RETURNING "id", "status", "created_at";
WITH ordering AS MATERIALIZED (
  SELECT (SELECT count(*) FROM (SELECT pg_advisory_xact_lock(hashtextextended('idempotency_outbox:' || :order_ref, 0)) WHERE :order_ref::text IS NOT NULL) AS held) AS locks,
         (SELECT count(*) FROM (SELECT pg_notify('idempotency_outbox', '') WHERE :notify::boolean) AS sent) AS notified),
     source AS (
       SELECT encode(sha256(convert_to(concat_ws(E'\n', scope, operation, key, (extract(epoch FROM created_at) * 1000000)::bigint, ''::text, :event_index::int), 'UTF8')), 'hex') AS h
         FROM "public".idempotency_records WHERE scope = :scope AND operation = :operation AND key = :key)
INSERT INTO "public".idempotency_outbox (id, type, payload, headers, ordering_key, source_key_hash)
SELECT (substr(h, 1, 12) || '8' || substr(h, 14, 3) || substr('89ab', ('x' || substr(h, 17, 1))::bit(4)::int % 4 + 1, 1) || substr(h, 18, 15))::uuid, :event_type, :payload::jsonb, :event_headers::jsonb, :order_ref, :source_key_hash FROM source, ordering
RETURNING id;
\startpipeline
INSERT INTO "public".idempotency_records AS r (scope, operation, key, fingerprint, status, response_status, response_headers, response_body, created_at, completed_at, expires_at)
       VALUES (:scope, :operation, :key, :fingerprint, 'completed', :response_status::smallint, :response_headers::jsonb, :response_body::text, now(), now(), now() + :retention_ms * interval '1 millisecond')
       ON CONFLICT (scope, operation, key) DO UPDATE
         SET status = 'completed', response_status = EXCLUDED.response_status, response_headers = EXCLUDED.response_headers,
             response_body = EXCLUDED.response_body, completed_at = EXCLUDED.completed_at
         WHERE r.status = 'in_progress'
       RETURNING false AS took_over, r.expires_at, now() AS database_now;
COMMIT;
\endpipeline
