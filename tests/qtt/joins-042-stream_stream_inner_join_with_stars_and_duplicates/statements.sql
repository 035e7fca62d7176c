CREATE STREAM TEST (ID BIGINT KEY, NAME varchar, VALUE bigint) WITH (kafka_topic='left_topic', value_format='JSON');
CREATE STREAM TEST_STREAM (ID BIGINT KEY, F1 varchar, F2 bigint) WITH (kafka_topic='right_topic', value_format='JSON');
CREATE STREAM INNER_JOIN as SELECT t.*, t.F1 AS F1_2, tt.*, tt.NAME AS NAME_2 FROM test tt inner join TEST_STREAM t WITHIN 11 SECONDS ON t.id = tt.id;
