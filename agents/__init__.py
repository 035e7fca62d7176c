"""Faust agents of the streamapp worker, discovered by ``autodiscover=["agents"]``."""
