"""The SDK and the top-level package export exactly what they mean to."""

import stepwatch
import stepwatch.sdk as sdk


def test_exported_names() -> None:
    assert sorted(sdk.__all__) == [
        "Command",
        "CommandPoller",
        "Controller",
        "DROPPED_SAMPLES",
        "FAILED",
        "HEARTBEAT",
        "OK",
        "Outcome",
        "Pipeline",
        "Run",
        "UNSUPPORTED",
        "current_run",
        "finish",
        "init",
        "log",
    ]
    assert sorted(stepwatch.__all__) == ["Run", "__version__", "finish", "init", "log"]
    assert stepwatch.Run is sdk.Run and stepwatch.init is sdk.init
    assert stepwatch.__version__ == "0.1.0"
