"""Off the training thread: swap the buffer, encode one SWB frame, append it to the spool."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import numpy as np

from ..model import DROPPED_SAMPLES, NO_STEP
from ..spool import Spool
from ..wire import encode
from ._buffer import Buffer, Columns, SeriesTable

__all__ = ["BatchWriter"]

log = logging.getLogger("stepwatch.sdk")

_Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class BatchWriter:
    """Writes the buffer to the spool as numbered batches; counts what the spool cap dropped.

    Args:
        buffer, table: where the training thread puts samples and series keys.
        spool: the durable destination.
        source: this writer's source id (``seq`` counts from 0 per source).
        dropped_series: series id of ``stepwatch.dropped_samples``, reported once space returns.
        wall: clock for the dropped-samples report.
        on_written: called after each batch is durable (wakes the sender).
    """

    def __init__(
        self,
        buffer: Buffer,
        table: SeriesTable,
        spool: Spool,
        source: str,
        dropped_series: int,
        wall: Callable[[], float],
        on_written: Callable[[], None] = lambda: None,
    ) -> None:
        self._buffer, self._table, self._spool = buffer, table, spool
        self._source, self._dropped_series, self._wall = source, dropped_series, wall
        self._on_written = on_written
        self._lock = threading.Lock()
        self.seq = 0
        self.written_samples = 0
        self.dropped_samples = 0
        self._reported = 0
        self._warned = False

    def flush(self) -> None:
        """Make everything logged so far durable (or count it dropped); safe from any thread."""
        self._write(self._buffer.swap())

    def close(self) -> None:
        """Flush a last time; a count of drops not yet reported then goes into the spool even
        past its cap (one small batch), so the record of what the run lost is not lost itself."""
        self.flush()
        self._write(Columns.of([], []), past_cap=True)

    def _write(self, cols: Columns, past_cap: bool = False) -> None:
        with self._lock:
            arrays: _Arrays = (cols.value, cols.ts, cols.step, cols.series)
            logged = len(arrays[0])
            report = self.dropped_samples
            if report != self._reported:
                arrays = self._with_report(arrays, report)
            if not len(arrays[0]) and not cols.events:
                return
            if self._append(self._encode(arrays, cols), logged, past_cap):
                self.written_samples += logged
                self._reported = report
                self._on_written()

    def _with_report(self, arrays: _Arrays, dropped: int) -> _Arrays:
        """Add one ``stepwatch.dropped_samples`` sample, so the server learns of the loss."""
        extra = (float(dropped), self._wall(), NO_STEP, self._dropped_series)
        return tuple(  # type: ignore[return-value]
            np.append(col, np.array([x], col.dtype)) for col, x in zip(arrays, extra, strict=True)
        )

    def _encode(self, arrays: _Arrays, cols: Columns) -> bytes:
        value, ts, step, series = arrays
        used, index = np.unique(series, return_inverse=True)
        keys = [self._table.wire_keys[i] for i in used.tolist()]
        frame = encode(
            self._source, self.seq, keys, value, ts, step, index.astype(np.uint32), cols.events
        )
        return frame

    def _append(self, frame: bytes, logged: int, past_cap: bool) -> bool:
        try:
            written = self._spool.append(frame, past_cap=past_cap)
        except OSError as exc:
            self._drop(logged, f"could not write to the spool ({exc})")
            return False
        if not written:
            cap = f"{self._spool.max_bytes:,} bytes"
            self._drop(logged, f"the spool at {self._spool.path} is full (its cap: {cap})")
            return False
        self.seq += 1
        return True

    def _drop(self, samples: int, why: str) -> None:
        self.dropped_samples += samples
        if not self._warned:
            self._warned = True
            log.warning(
                "stepwatch: %s; dropping new batches until it drains (counted in %s)",
                why,
                DROPPED_SAMPLES,
            )
