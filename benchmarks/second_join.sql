-- The second join (benchmarks/declared_join.py, tests/test_declared_join_broker.py): customers x payments,
-- declared only in SQL, with a copy of the table through murmur2 as the seed makes one; {tag} names the run.
CREATE TABLE customers (id BIGINT PRIMARY KEY, email STRING, tier STRING)
  WITH (KAFKA_TOPIC='customers_{tag}', VALUE_FORMAT='JSON');
CREATE TABLE customers_by_id WITH (KAFKA_TOPIC='customers_by_id_{tag}') AS
  SELECT id, email, tier FROM customers EMIT CHANGES;
CREATE STREAM payments (customer_id BIGINT KEY, amount DECIMAL(10, 2), currency STRING, paid_at BIGINT)
  WITH (KAFKA_TOPIC='payments_{tag}', VALUE_FORMAT='JSON', TIMESTAMP='paid_at');
CREATE STREAM payments_enriched WITH (KAFKA_TOPIC='payments_enriched_{tag}') AS
  SELECT p.customer_id, amount, currency, paid_at, email, tier
  FROM payments p LEFT JOIN customers c ON p.customer_id = c.id EMIT CHANGES;
CREATE STREAM payments_enriched_by_id WITH (KAFKA_TOPIC='payments_enriched_by_id_{tag}') AS
  SELECT p.customer_id, amount, currency, paid_at, email, tier
  FROM payments p LEFT JOIN customers_by_id c ON p.customer_id = c.id EMIT CHANGES;
