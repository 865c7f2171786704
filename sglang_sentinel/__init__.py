"""sglang-sentinel: watches SGLang startups in the systemd journal and names what changed."""

__version__ = "0.1.0"
