CREATE TABLE test_table (id1 BIGINT PRIMARY KEY, f1 BIGINT) WITH (kafka_topic='left_topic', format='JSON');
CREATE STREAM test_stream (id2 BIGINT KEY, f2 BIGINT) WITH (kafka_topic='right_topic', format='JSON');
CREATE TABLE output AS SELECT id1, id2, f1, f2 FROM test_table LEFT JOIN test_stream ON id1 = id2;
