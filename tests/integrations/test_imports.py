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


ATTRIBUTES = """
import json, sys
import stepwatch
frameworks = ("torch", "transformers", "lightning", "pytorch_lightning")
before = sorted(m for m in frameworks if m in sys.modules)
reached = {
    "control": stepwatch.torch.control.__module__,
    "huggingface": stepwatch.integrations.huggingface.StepwatchCallback.__module__,
    "lightning": stepwatch.integrations.lightning.StepwatchCallback.__module__,
    "pytorch_lightning": stepwatch.integrations.pytorch_lightning.StepwatchCallback.__module__,
}
try:
    stepwatch.integrations.tensorflow
except AttributeError as exc:
    reached["missing"] = str(exc)
print(json.dumps({"before": before, "reached": reached, "dir": "torch" in dir(stepwatch)}))
"""


def test_integrations_are_attributes_after_import_stepwatch_alone() -> None:
    out = subprocess.run(
        [sys.executable, "-c", ATTRIBUTES], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == {
        "before": [],
        "reached": {
            "control": "stepwatch.torch._control",
            "huggingface": "stepwatch.integrations.huggingface",
            "lightning": "stepwatch.integrations.lightning",
            "pytorch_lightning": "stepwatch.integrations.pytorch_lightning",
            "missing": "module 'stepwatch.integrations' has no attribute 'tensorflow'",
        },
        "dir": True,
    }


def test_exported_names() -> None:
    import stepwatch.integrations as integrations
    import stepwatch.integrations.huggingface as huggingface
    import stepwatch.integrations.lightning as lightning
    import stepwatch.integrations.pytorch_lightning as pytorch_lightning

    assert integrations.__all__ == []
    for module in (huggingface, lightning, pytorch_lightning):
        assert module.__all__ == ["StepwatchCallback"]
