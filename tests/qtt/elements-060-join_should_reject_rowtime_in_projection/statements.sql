CREATE STREAM LEFT_STREAM (K STRING KEY, F0 INT) WITH (kafka_topic='left', value_format='JSON');
CREATE STREAM RIGHT_STREAM (K STRING KEY, F1 INT) WITH (kafka_topic='right', value_format='JSON');
CREATE STREAM OUTPUT as SELECT l.K, l.ROWTIME AS ROWTIME, f0, f1 FROM left_stream l join right_stream r WITHIN 1 seconds ON l.k = r.k;
