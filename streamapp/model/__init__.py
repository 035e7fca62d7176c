"""The records and their rules, pure: what a user and an order are, the join's output, dead letters, key forms.

No Kafka client and no Faust here, so every rule is tested on plain values.
"""
