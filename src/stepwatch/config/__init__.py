"""Reading the collector's configuration files (rules, policies, playbooks, notification routing)
through YAML's nodes, so that every mistake names its file, line and field."""

from ._yaml_fields import At, Problems, RuleError, compose, parse_duration, read_config

__all__ = ["At", "Problems", "RuleError", "compose", "parse_duration", "read_config"]
