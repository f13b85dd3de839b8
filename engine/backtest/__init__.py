"""Backtests: every logged record evaluated and decided under a pack and a baseline pack.

The work is cut into chunks (engine.backtest.records) and ``run_chunk`` turns one chunk
into a ``Tally`` (engine.backtest.tally; each record judged by engine.backtest.judge):
pure, picklable, the same function for every executor (engine.backtest.executors).
Tallies are small and merge in input order (engine.backtest.run), so the report does not
depend on how many workers ran, and memory stays constant whatever the input size.
"""

from __future__ import annotations

from engine.backtest.executors import Executor, dask_executor, local_executor, run_inline
from engine.backtest.judge import REMEMBERED_DECISIONS, Judge, loaded_pack
from engine.backtest.records import SKIP_BYTES, BacktestError, Chunk, read_chunk
from engine.backtest.run import Report, backtest
from engine.backtest.tally import Tally, tally_lines

__all__ = [
    "REMEMBERED_DECISIONS",
    "SKIP_BYTES",
    "BacktestError",
    "Chunk",
    "Executor",
    "Judge",
    "Report",
    "Tally",
    "backtest",
    "dask_executor",
    "loaded_pack",
    "local_executor",
    "read_chunk",
    "run_inline",
    "tally_lines",
]
