"""Only the compiled fast path lives here; all metadata is in setup.cfg."""
from setuptools import Extension, setup

setup(
    ext_modules=[
        # The partitioners' C fast path; streamapp falls back to pure Python (and a test fails) without it.
        Extension(
            "streamapp.partitioners._fast",
            sources=["streamapp/partitioners/_fast.c"],
            extra_compile_args=["-O3"],
            optional=True,
        )
    ]
)
