"""Co-partitioning: which partitioner wrote a topic (fingerprint, scoring, verdict), the guard over the worker's
joins, the doctor over a whole cluster (its pairs, key encodings, fixes and report), live drift, and the keys that
adding partitions would move (impact)."""
