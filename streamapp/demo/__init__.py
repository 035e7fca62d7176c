"""The demo: its records, the producer, the ksqlDB client, ksqlDB's joins on Kafka Streams (not ksqlDB), and the reports."""
