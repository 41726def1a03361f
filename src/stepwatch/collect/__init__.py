"""Sources of samples on a node (host, GPU, logs, exporters) and the agent that ships them."""

from ._agent import SOURCE_ERRORS, Agent
from ._source import Reading, Sample, Source

__all__ = ["SOURCE_ERRORS", "Agent", "Reading", "Sample", "Source"]
