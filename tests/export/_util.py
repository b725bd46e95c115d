"""Helpers for the exports' tests: recorded traces, a trace with a secret in
its text, and reading a Parquet dataset back."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "recordings" / "traces"
#: a key shape the scrubber knows (route/secrets.py "sk-key"); never a real key
SECRET = "sk-test" + "0123456789abcdefghijKLMN"


def recorded(name: str) -> Path:
    return TRACES / f"{name}.db"


def with_secret_text(tmp: Path) -> Path:
    """A copy of the openai recording whose first answer and question carry
    :data:`SECRET` (the recording was made with redaction on: the text was
    never masked because it held no secret)."""
    dst = tmp / "secret.db"
    shutil.copy(recorded("openai"), dst)
    con = sqlite3.connect(dst)
    with con:
        con.execute("UPDATE frames SET text = replace(text, 'Hello ', 'Hello " + SECRET + " ') WHERE exchange_id = 0")
        con.execute("UPDATE exchanges SET request_body = CAST(replace(CAST(request_body AS TEXT), 'Say hello.', 'Say " + SECRET
                    + "') AS BLOB) WHERE id = 0")
    con.close()
    return dst


def read_table(root: Path, table: str) -> list[dict[str, Any]]:
    """Every row of a dataset table, with its ``date`` and ``backend`` partition keys."""
    import pyarrow.dataset as ds

    return ds.dataset(root / table, format="parquet", partitioning="hive").to_table().to_pylist()


def with_split_secret(tmp: Path) -> Path:
    """A copy of the openai recording whose answer streams :data:`SECRET` cut
    across two events (frames 1 and 2 of exchange 0), as a trace recorded
    before the recorder joined a stream's text (issue 32) may hold it: no
    single frame holds the key whole, the decoded answer does."""
    dst = tmp / "split.db"
    shutil.copy(recorded("openai"), dst)
    cut = len(SECRET) // 2
    con = sqlite3.connect(dst)
    with con:
        for idx, old, new in ((1, '"Hello "', f'"Hello {SECRET[:cut]}"'), (2, '"from t"', f'"{SECRET[cut:]} from t"')):
            con.execute("UPDATE frames SET text = replace(text, ?, ?), raw = NULL WHERE exchange_id = 0 AND idx = ?", (old, new, idx))
    con.close()
    return dst
