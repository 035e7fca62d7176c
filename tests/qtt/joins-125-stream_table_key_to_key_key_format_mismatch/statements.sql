CREATE TABLE T (ID INT PRIMARY KEY, VAL STRING) WITH (kafka_topic='t', key_format='KAFKA', value_format='JSON');
CREATE STREAM S (ID INT KEY, FOO INT) WITH (kafka_topic='s', key_format='DELIMITED', value_format='JSON');
CREATE STREAM OUTPUT AS SELECT S.ID, VAL FROM S JOIN T ON S.ID = T.ID;
