-- The seed's joins: the demo's users table, the same table repartitioned through ksqlDB's (murmur2)
-- partitioner, the orders stream, and a LEFT JOIN of the orders with each of the two tables.
-- The worker runs these by default (the `statements` setting); `make demo` runs them on both engines.

CREATE TABLE IF NOT EXISTS DEMO_USER (user_id VARCHAR PRIMARY KEY, name VARCHAR, age BIGINT)
  WITH (kafka_topic='demo_user', VALUE_FORMAT='JSON');

CREATE TABLE IF NOT EXISTS DEMO_USER_REPARTITION WITH (kafka_topic='demo_user_repartition', VALUE_FORMAT='JSON') AS
  SELECT user_id, name, age FROM DEMO_USER EMIT CHANGES;

CREATE STREAM IF NOT EXISTS DEMO_USER_ORDERS (user_id VARCHAR KEY, ts BIGINT, product_id BIGINT, qty BIGINT,
  unit_price DOUBLE, channel VARCHAR) WITH (kafka_topic='demo_user_orders', VALUE_FORMAT='JSON', timestamp='ts');

CREATE STREAM IF NOT EXISTS DEMO_USER_ORDERS_MERGED WITH (kafka_topic='DEMO_USER_ORDERS_MERGED') AS
  SELECT DEMO_USER_ORDERS.user_id AS user_id, DEMO_USER.name, DEMO_USER.age, product_id, qty, unit_price, channel, ts
  FROM DEMO_USER_ORDERS LEFT JOIN DEMO_USER ON DEMO_USER_ORDERS.user_id = DEMO_USER.user_id EMIT CHANGES;

CREATE STREAM IF NOT EXISTS DEMO_USER_ORDERS_MERGED_REPARTITION WITH (kafka_topic='DEMO_USER_ORDERS_MERGED_REPARTITION') AS
  SELECT DEMO_USER_ORDERS.user_id AS user_id, DEMO_USER_REPARTITION.name, DEMO_USER_REPARTITION.age, product_id, qty,
    unit_price, channel, ts
  FROM DEMO_USER_ORDERS LEFT JOIN DEMO_USER_REPARTITION ON DEMO_USER_ORDERS.user_id = DEMO_USER_REPARTITION.user_id
  EMIT CHANGES;
