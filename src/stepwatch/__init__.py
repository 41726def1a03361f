"""stepwatch: watch large-model training runs while they happen and keep them healthy."""

__version__ = "0.1.0"
