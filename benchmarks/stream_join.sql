-- The windowed join benchmark (benchmarks/stream_join.py, issue 37): orders x shipments, a LEFT JOIN of two streams
-- on the order id, one hour either way, 30 minutes' grace; {tag} names the run.
CREATE STREAM orders (id BIGINT KEY, item STRING, qty INT)
  WITH (KAFKA_TOPIC='orders_{tag}', VALUE_FORMAT='JSON');
CREATE STREAM shipments (id BIGINT KEY, carrier STRING)
  WITH (KAFKA_TOPIC='shipments_{tag}', VALUE_FORMAT='JSON');
CREATE STREAM order_shipments WITH (KAFKA_TOPIC='order_shipments_{tag}') AS
  SELECT o.id, item, qty, carrier FROM orders o LEFT JOIN shipments s WITHIN 1 HOUR GRACE PERIOD 30 MINUTES
  ON o.id = s.id EMIT CHANGES;
