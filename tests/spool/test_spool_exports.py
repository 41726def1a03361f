"""The spool package exports exactly what it means to."""

import stepwatch.spool as spool


def test_exported_names() -> None:
    assert sorted(spool.__all__) == sorted(
        [
            "DEFAULT_CAP_BYTES",
            "ENV_MAX_SPOOL",
            "LOCK_FILE",
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
            "OrphanShipper",
            "Position",
            "Response",
            "Sealer",
            "Sender",
            "ShipStats",
            "Spool",
            "SpoolKeyError",
            "SpoolLock",
            "SyncResult",
            "Transport",
            "TransportError",
            "has_unsent",
            "open_transport",
            "read_run",
            "remove_delivered",
            "remove_run_dir",
            "spool_cap",
            "sync",
            "write_run",
        ]
    )
    assert all(hasattr(spool, name) for name in spool.__all__)
