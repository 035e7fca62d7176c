"""Only the compiled fast path lives here; all metadata is in setup.cfg."""
from setuptools import setup

setup()
