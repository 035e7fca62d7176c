CREATE STREAM left_stream (id INT KEY, b INT, c INT) WITH (kafka_topic='LEFT_TOPIC', value_format='JSON');
CREATE STREAM right_stream (id INT KEY, e INT, f INT) WITH (kafka_topic='RIGHT_TOPIC', value_format='JSON');
CREATE STREAM output AS SELECT ls.id, ls.b, ls.c, rs.e, rs.f FROM left_stream AS ls INNER JOIN right_stream AS rs WITHIN 10 SECONDS ON ls.id = rs.id;
