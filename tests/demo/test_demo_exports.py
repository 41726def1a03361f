"""The demo package exports exactly what the CLI and fault-injection code mean to use."""

import stepwatch.demo as demo


def test_exported_names() -> None:
    assert sorted(demo.__all__) == [
        "Activity",
        "DemoConfig",
        "DemoSummary",
        "FAULT_KINDS",
        "FAULT_PRESETS",
        "FAULT_SPECS",
        "Fault",
        "FaultKind",
        "FaultPlan",
        "GPU_METRICS",
        "HOST_METRICS",
        "HardwareSample",
        "HardwareSim",
        "Imperfections",
        "Phase",
        "RecordedScenario",
        "StepMetrics",
        "TrainingShape",
        "TrainingSim",
        "as_sent",
        "fault_preset",
        "imperfect",
        "record_scenario",
        "run_demo",
    ]
    assert all(hasattr(demo, name) for name in demo.__all__)
