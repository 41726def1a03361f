"""``import stepwatch`` stays light: frameworks load only with the module that needs them."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import importlib, json, sys
frameworks = ("torch", "transformers", "lightning", "pytorch_lightning")
loaded = {}
for module in sys.argv[1:]:
    importlib.import_module(module)
    loaded[module] = sorted(m for m in frameworks if m in sys.modules)
print(json.dumps(loaded))
"""


def test_frameworks_load_only_with_their_integration() -> None:
    modules = ["stepwatch", "stepwatch.integrations", "stepwatch.torch"]
    modules.append("stepwatch.integrations.huggingface")
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *modules], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == {
        "stepwatch": [],
        "stepwatch.integrations": [],
        "stepwatch.torch": ["torch"],
        "stepwatch.integrations.huggingface": ["torch", "transformers"],
    }


def test_exported_names() -> None:
    import stepwatch.integrations as integrations
    import stepwatch.integrations.huggingface as huggingface
    import stepwatch.integrations.lightning as lightning
    import stepwatch.integrations.pytorch_lightning as pytorch_lightning

    assert integrations.__all__ == []
    for module in (huggingface, lightning, pytorch_lightning):
        assert module.__all__ == ["StepwatchCallback"]
