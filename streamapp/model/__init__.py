"""The records and their rules, pure: ksqlDB's JSON coercions (``records``), dead letters, key forms.

No Kafka client and no Faust here, so every rule is tested on plain values.
"""
