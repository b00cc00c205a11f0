"""The monitor's history columns, made from numpy buffers (mirrorwatch.monitor.history), equal what ``pa.array``
makes of the same values, and building a snapshot's table does not import pandas even where it is installed
(``pa.array`` would: ~50 MB the monitor would hold for good)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from mirrorwatch.monitor.history import _fixed_column, _int64_column, _repeated_string, _string_column

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "values",
    [[0, 5, 7], [-1, 3, -1], [-1, -1], [2**40, 0, -5], list(range(-3, 70))],  # 70 rows: a bitmap of 9 bytes
)
def test_an_int64_column_is_null_where_negative(values: list[int]) -> None:
    expected = pa.array([v if v >= 0 else None for v in values], pa.int64())
    assert _int64_column(np.array(values, np.int64)).equals(expected)


@pytest.mark.parametrize(
    "kind, values, valid, expected",
    [
        (pa.float64(), [1.5, np.nan, 0.0], [True, False, True], [1.5, None, 0.0]),
        (pa.float64(), [0.25], None, [0.25]),
        (pa.int32(), [0, 1, 2], None, [0, 1, 2]),
        (pa.timestamp("ms", tz="UTC"), [1_700_000_000_000] * 2, None, [1_700_000_000_000] * 2),
    ],
)
def test_a_fixed_width_column_holds_the_values(kind, values, valid, expected) -> None:
    dtype = {8: np.float64 if pa.types.is_floating(kind) else np.int64, 4: np.int32}[kind.byte_width]
    column = _fixed_column(kind, np.array(values, dtype), None if valid is None else np.array(valid))
    assert column.equals(pa.array(expected, pa.int64() if pa.types.is_timestamp(kind) else kind).cast(kind))


def test_a_column_of_the_wrong_width_is_refused() -> None:
    with pytest.raises(TypeError):
        _fixed_column(pa.int64(), np.array([1, 2], np.int32))


@pytest.mark.parametrize("texts", [["a", "bb", ""], ["été", "topic.with-dots"], [""], ["x" * 300] * 3])
def test_a_string_column_holds_the_texts(texts: list[str]) -> None:
    assert _string_column(texts).equals(pa.array(texts, pa.string()))
    assert _repeated_string(texts[0], 4).equals(pa.array([texts[0]] * 4, pa.string()))


def test_a_snapshot_table_is_built_without_importing_pandas() -> None:
    code = (
        "import sys\n"
        "from tests.support.monitor_views import mirror_view, snapshot, unknown_view\n"
        "from mirrorwatch.monitor.history import snapshot_table\n"
        "table = snapshot_table(snapshot(mirror_view(), unknown_view()))\n"
        "assert table.num_rows == 2, table\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pandas'))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
