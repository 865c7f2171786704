"""The optional C readers (sglang_sentinel/sources/_journalread.c, _fileread.c); everything else is in pyproject.toml.

Built when a compiler, the Python headers and libsystemd's (libsystemd-dev) are there, as
systemd-python itself needs them; without them the build says why and the package runs its
pure-Python readers (`sentinel --version` names the journal reader it runs). _fileread needs
only the compiler and the Python headers.
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
        ),
        Extension(
            "sglang_sentinel.sources._fileread",
            ["sglang_sentinel/sources/_fileread.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
    ]
)
