"""The nightly PySpark reconciliation job."""
