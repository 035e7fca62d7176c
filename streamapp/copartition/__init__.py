"""Co-partitioning: which partitioner wrote a topic (fingerprint), the guard over the worker's joins, and the keys that adding partitions would move."""
