"""The generated pricing tables ship as data: checked on load, read on first use, never at import."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from importlib import resources

import pytest

from contextwindow.errors import DamagedData
from contextwindow.pricing import _tables
from contextwindow.pricing._tables import FORMAT_VERSION, TABLES, decode, encode, table


def _shipped(name: str) -> bytes:
    return resources.files("contextwindow.pricing").joinpath("data").joinpath(f"{name}.json.gz").read_bytes()


def _record(name: str) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(gzip.decompress(_shipped(name)))
    return loaded


class TestShippedTables:
    @pytest.mark.parametrize("name", TABLES)
    def test_each_table_loads_and_passes_its_checks(self, name: str) -> None:
        assert table(name)
        assert _record(name)["version"] == FORMAT_VERSION

    @pytest.mark.parametrize("name", TABLES)
    def test_the_generator_writes_exactly_the_shipped_bytes(self, name: str) -> None:
        # the fitting script writes with ``encode``: a table regenerated unchanged is byte-identical
        assert encode(name, table(name)) == _shipped(name)

    def test_import_reads_no_table_and_the_first_price_does(self) -> None:
        code = (
            "import sys, contextwindow\n"
            "from contextwindow.pricing import _tables\n"
            "assert _tables.table.cache_info().currsize == 0, 'read at import'\n"
            "assert 'gzip' not in sys.modules, 'gzip imported at import'\n"
            "contextwindow.Estimator('claude-sonnet-4-5').text('hello world')\n"
            "print(_tables.table.cache_info().currsize)\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert int(out.stdout) >= 3  # the Claude coefficients, the scales and the vocabulary


class TestDamagedTables:
    def _rewrite(self, name: str, **changes: object) -> bytes:
        record = {**_record(name), **changes}
        return gzip.compress(json.dumps(record).encode())

    def test_a_changed_payload_fails_its_checksum(self) -> None:
        payload = str(_record("coefficients")["payload"]).replace("0.", "1.", 1)
        with pytest.raises(DamagedData, match="checksum"):
            decode("coefficients", self._rewrite("coefficients", payload=payload))

    def test_another_format_version_is_refused(self) -> None:
        with pytest.raises(DamagedData, match="format version 99"):
            decode("textrule", self._rewrite("textrule", version=99))

    def test_a_truncated_file_is_refused(self) -> None:
        data = _shipped("vocabulary-cl100k")
        with pytest.raises(DamagedData, match="not a gzip of JSON"):
            decode("vocabulary-cl100k", data[: len(data) // 2])

    def test_a_table_under_another_name_is_refused(self) -> None:
        with pytest.raises(DamagedData, match="holds the table"):
            decode("vocabulary-o200k", _shipped("vocabulary-cl100k"))

    def test_something_else_is_refused(self) -> None:
        with pytest.raises(DamagedData, match="not a contextwindow pricing table"):
            decode("textrule", gzip.compress(b'{"hello": 1}'))

    def test_a_missing_file_says_to_reinstall(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(_tables, "TABLES", (*TABLES, "nothing-here"))
        try:
            with pytest.raises(DamagedData, match=r"missing.*reinstall"):
                table("nothing-here")
        finally:
            table.cache_clear()
