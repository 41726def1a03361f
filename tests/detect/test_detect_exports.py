"""The detect package exports what it means to, and every registered detector is a Detector."""

import stepwatch.detect as detect


def test_exports_resolve_and_detectors_are_registered() -> None:
    assert all(hasattr(detect, name) for name in detect.__all__)
    assert set(detect.DETECTORS) == {"nonfinite", "robust_z", "cusum", "trend", "plateau"}
    assert all(issubclass(cls, detect.Detector) for cls in detect.DETECTORS.values())
