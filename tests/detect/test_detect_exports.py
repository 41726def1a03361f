"""The detect package exports what it means to; the registry holds the detectors rules name."""

import stepwatch.detect as detect
from stepwatch.detect.rules import across_members


def test_exports_resolve_and_detectors_are_registered() -> None:
    assert all(hasattr(detect, name) for name in detect.__all__)
    per_series = {"nonfinite", "robust_z", "cusum", "trend", "plateau", "rise", "share", "iqr"}
    assert set(detect.DETECTORS) == per_series | {"peers", "absence"}
    assert all(issubclass(detect.DETECTORS[name], detect.Detector) for name in per_series)
    assert {name for name, cls in detect.DETECTORS.items() if across_members(cls)} == {
        "peers",
        "absence",
    }
