"""Framework callbacks: ``stepwatch.integrations.huggingface`` and ``.lightning``.

Each lives in its own module and imports its framework only when imported, so
``import stepwatch`` never pulls in transformers or Lightning.
"""

__all__: list[str] = []
