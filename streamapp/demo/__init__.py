"""The demo: its records, the producer, the ksqlDB client and its Kafka Streams stand-in, and the reports."""
