"""The demo: its records, the producer, the ksqlDB client, and the reports."""
