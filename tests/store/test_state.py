"""The state slot calibration and anchors persist through."""

from __future__ import annotations

from contextwindow.store.slots import MemorySlot, StateSlot


class TestMemorySlot:
    def test_is_a_state_slot(self) -> None:
        assert isinstance(MemorySlot(), StateSlot)

    def test_load_gives_the_newest_record_or_none(self) -> None:
        slot = MemorySlot()
        assert slot.load() is None
        slot.save({"a": 1})
        slot.save({"a": 2})
        assert slot.load() == {"a": 2}
        assert [r["a"] for r in slot.history] == [1, 2]

    def test_records_are_copied_both_ways(self) -> None:
        record = {"nested": {"x": 1}}
        slot = MemorySlot()
        slot.save(record)
        record["nested"]["x"] = 99
        loaded = slot.load()
        assert loaded == {"nested": {"x": 1}}
        loaded["nested"]["x"] = 5  # type: ignore[index]
        assert slot.load() == {"nested": {"x": 1}}
