"""The top package exports exactly what the CLI and embedding code mean to use."""

import stepwatch.top as top


def test_exported_names() -> None:
    assert sorted(top.__all__) == [
        "AlertRow",
        "Forecast",
        "GpuRow",
        "Snapshot",
        "StepTimes",
        "TopClient",
        "TopError",
        "format_duration",
        "render",
        "sparkline",
        "watch",
    ]
    assert all(hasattr(top, name) for name in top.__all__)
