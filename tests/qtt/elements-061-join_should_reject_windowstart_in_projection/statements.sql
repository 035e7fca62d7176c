CREATE STREAM LEFT_STREAM (K STRING KEY, F0 INT) WITH (kafka_topic='left', value_format='JSON', window_type='tumbling', window_size='1 second');
CREATE STREAM RIGHT_STREAM (K STRING KEY, F1 INT) WITH (kafka_topic='right', value_format='JSON', window_type='tumbling', window_size='1 second');
CREATE STREAM OUTPUT as SELECT l.K, l.WINDOWSTART AS WINDOWSTART, f0 FROM left_stream l join right_stream r WITHIN 1 seconds ON l.k = r.k;
