"""The client package exports exactly what the CLI, top and embedding code mean to use."""

import stepwatch.client as client


def test_exported_names() -> None:
    assert sorted(client.__all__) == ["ApiSession", "ClientError", "CollectorClient", "NEXT_CURSOR"]
    assert all(hasattr(client, name) for name in client.__all__)
