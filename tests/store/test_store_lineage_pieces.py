"""A branch's view as pieces: each position read from the nearest session that holds it, edits too."""

from __future__ import annotations

import sqlite3

import pytest

from contextwindow.store._lineage import INLINE_PIECES, Piece, compose, lineage, live, pieces_sql


def _owner(pieces: list[Piece], position: int) -> list[str]:
    return [p.session_id for p in pieces if p.lo <= position and (p.hi is None or position < p.hi)]


class TestCompose:
    def test_a_branch_with_edits_reads_the_parents_rows_around_them(self) -> None:
        forks = {"b": ("a", 10)}
        pieces = compose(lineage("b", forks), forks, {"b": [3, 7]})
        assert [_owner(pieces, p) for p in range(12)] == [
            ["a"],
            ["a"],
            ["a"],
            ["b"],
            ["a"],
            ["a"],
            ["a"],
            ["b"],
            ["a"],
            ["a"],
            ["b"],
            ["b"],
        ]

    def test_a_nearer_edit_wins_over_an_ancestors_edit_at_the_same_position(self) -> None:
        forks = {"b": ("a", 10), "c": ("b", 12)}
        pieces = compose(lineage("c", forks), forks, {"b": [3, 5], "c": [3, 11]})
        owners = [_owner(pieces, p) for p in range(14)]
        assert owners[3] == ["c"] and owners[5] == ["b"] and owners[11] == ["c"]
        assert owners[10] == ["b"] and owners[13] == ["c"] and owners[0] == ["a"]
        assert all(len(o) == 1 for o in owners)

    def test_a_read_past_the_edits_skips_their_pieces(self) -> None:
        forks = {"b": ("a", 10)}
        pieces = compose(lineage("b", forks), forks, {"b": [3]})
        assert {p.session_id for p in live(pieces, 8)} == {"a", "b"}
        assert [p.lo for p in live(pieces, 8)] == [4, 10]


@pytest.mark.parametrize("edits", [[2], list(range(0, 2 * INLINE_PIECES, 2))], ids=["inline", "values-join"])
def test_the_condition_selects_exactly_the_view_in_sqlite(edits: list[int]) -> None:
    forks = {"b": ("a", 2 * INLINE_PIECES + 4)}
    pieces = compose(lineage("b", forks), forks, {"b": edits})
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE entries (session_id TEXT, position INTEGER)")
    db.executemany("INSERT INTO entries VALUES ('a', ?)", [(p,) for p in range(forks["b"][1])])
    db.executemany("INSERT INTO entries VALUES ('b', ?)", [(p,) for p in [*edits, forks["b"][1]]])
    join, condition, params = pieces_sql(pieces)
    rows = db.execute(
        f"SELECT session_id, position FROM entries{join} WHERE {condition} ORDER BY position", params
    ).fetchall()
    assert [r[1] for r in rows] == list(range(forks["b"][1] + 1))
    assert [r[0] for r in rows] == [
        "b" if p in edits or p == forks["b"][1] else "a" for p, _ in enumerate(rows)
    ]


class TestOneLowerBoundPerPiece:
    def test_a_read_after_a_position_bounds_each_piece_once(self) -> None:
        # Two lower bounds on one index range (position >= 0 AND position > n): SQLite ranges over
        # one and filters by the other, reading the whole session for an incremental read.
        assert pieces_sql([Piece("s", 0, None)]) == ("", "(session_id = ?)", ["s"])
        assert pieces_sql([Piece("s", 0, None)], after=9) == (
            "",
            "((session_id = ? AND position >= ?))",
            ["s", 10],
        )
        branch = [Piece("a", 0, 5), Piece("b", 5, None)]
        assert pieces_sql(branch, after=6) == ("", "((session_id = ? AND position >= ?))", ["b", 7])
        assert pieces_sql(branch, after=2)[2] == ["a", 3, 5, "b", 5]

    def test_an_incremental_read_of_a_long_session_reads_only_the_new_rows(self) -> None:
        db = sqlite3.connect(":memory:")
        db.execute("CREATE TABLE entries (session_id TEXT, position INTEGER, UNIQUE (session_id, position))")
        db.executemany("INSERT INTO entries VALUES ('s', ?)", [(p,) for p in range(20_000)])
        join, condition, params = pieces_sql([Piece("s", 0, None)], after=19_997)
        db.execute("SELECT 1")  # warm
        steps = []
        db.set_progress_handler(lambda: steps.append(1) and 0, 100)
        rows = db.execute(f"SELECT position FROM entries{join} WHERE {condition}", params).fetchall()
        assert rows == [(19_998,), (19_999,)]
        assert len(steps) < 20  # a range read, not a scan of 20,000 rows
