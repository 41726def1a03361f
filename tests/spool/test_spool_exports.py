"""The spool package exports exactly what it means to."""

import stepwatch.spool as spool


def test_exported_names() -> None:
    assert sorted(spool.__all__) == sorted(
        [
            "NODE_SPOOL",
            "REJECTED_DIR",
            "RUN_FILE",
            "AuthError",
            "Backoff",
            "ClientTls",
            "Connect",
            "FakeCollector",
            "Faults",
            "HttpClient",
            "Position",
            "Response",
            "Sealer",
            "Sender",
            "ShipStats",
            "Spool",
            "SpoolKeyError",
            "SyncResult",
            "TransportError",
            "read_run",
            "sync",
            "write_run",
        ]
    )
    assert all(hasattr(spool, name) for name in spool.__all__)
