"""Configuration: a YAML file, the environment and command-line overrides -> a validated Config.

schema.py  Config     the keys, their types, defaults and checks (one table)
load.py    load_config  reading, merging and validating; every problem named at once
reload.py  plan_reload  SIGHUP: per key, applied to the running daemon or kept until a restart
"""

from .load import load_config
from .reload import plan_reload
from .schema import (
    AlertmanagerConfig,
    Config,
    KubernetesConfig,
    ListenAddress,
    config_to_dict,
    pod_label_name,
)

__all__ = [
    "AlertmanagerConfig",
    "Config",
    "KubernetesConfig",
    "ListenAddress",
    "config_to_dict",
    "load_config",
    "plan_reload",
    "pod_label_name",
]
