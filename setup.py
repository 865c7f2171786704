"""The optional C reader (sglang_sentinel/sources/_journalread.c); everything else is in pyproject.toml.

Built when a compiler, the Python headers and libsystemd's (libsystemd-dev) are there, as
systemd-python itself needs them; without them the build says why and the package runs its
pure-Python reader (`sentinel --version` names the one it runs).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "sglang_sentinel.sources._journalread",
            ["sglang_sentinel/sources/_journalread.c"],
            libraries=["systemd"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
