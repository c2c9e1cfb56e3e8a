"""Full-text search in a chat's messages, their recaps and scene recaps (the recall tier).

The index is SQLite's FTS5 table `recall_index` (migration 5), kept in step with the messages
by triggers; it is ranked by BM25. A chat file outside the store gets the same by being
imported into an in-memory store (`SQLiteStore(":memory:")`).

May import: core (for the words a query keeps), the standard library and wordfreq.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from wordfreq import zipf_frequency

from autorecap.core.asking import query_forms, query_words
from autorecap.core.words import stems

COLUMN_WEIGHTS = (0.0, 1.0, 1.2, 0.8)
"""BM25 weights of the index's columns: chat (never matched), text, recap, scene recap. A
recap says the message's facts in fewer words, so a match there counts a little more."""


@dataclass(frozen=True)
class Hit:
    """A message that matched: its store id and how well (higher is better)."""

    message_id: int
    score: float


SEARCHED_WORDS = 6
"""A search looks for a query's rarest words only: they say what it asks about, and each common
word makes the index read its whole list of rows (of every chat in the store). Six keep a
search of a 10,000-message chat under 5 ms at the median with the stemmed index, and find as
much as eight on the evaluation's questions (`bench/bench_recall.py`, `autorecap eval`)."""


COMMON_ZIPF = 5.75
"""Words at least this common in English ("look", "know", "time": one in 1,800 words or more)
are left out of a search that has others: they tell a message apart from another little, and
each makes the index read a long list of rows."""


def rarest(words: list[str], most: int = SEARCHED_WORDS) -> list[str]:
    """The `most` rarest of `words` in English (a word with a digit, a code, first), in the
    query's order; one form of each word (the index finds its other forms: its stem), and no
    very common one unless nothing else is asked (`COMMON_ZIPF`)."""
    seen: set[str] = set()
    distinct = []
    for word, stem in zip(words, stems(words), strict=True):
        if stem not in seen:
            seen.add(stem)
            distinct.append(word)
    telling = [w for w in distinct if _commonness(w) < COMMON_ZIPF]
    words = telling or distinct
    if len(words) <= most:
        return words
    kept = set(sorted(words, key=_commonness)[:most])
    return [w for w in words if w in kept]


def searched_words(query: str) -> list[str]:
    """What a search of `query` looks for, in either store: its rarest words (`rarest`), then
    the other forms of the irregular verbs among them ("paid" for "pay": not one stem)."""
    words = rarest(query_words(query))
    return words + query_forms(query, words)


def _commonness(word: str) -> float:
    if any(c.isdigit() for c in word):
        return -1.0
    return float(zipf_frequency(word, "en"))


def match_expression(words: list[str]) -> str:
    """An FTS5 query matching any of `words`, each quoted (a code such as "14-02-27" is a
    phrase of its parts)."""
    return " OR ".join('"' + word.replace('"', '""') + '"' for word in words)


def chat_key(chat_id: str) -> str:
    """The one token the index files a chat's rows under (as the migration's triggers do)."""
    return "c" + chat_id.encode().hex().upper()


def search(
    db: sqlite3.Connection, chat_id: str, query: str, limit: int = 50, *, filed: bool = True
) -> list[Hit]:
    """The chat's messages that best match `query`, best first (none for a query of only
    common words). `filed`: the index holds several chats, filed under their keys."""
    words = searched_words(query)
    if not words:
        return []
    # Only the text columns: a word could spell a chat's key.
    expression = f"{{text recap scene}} : ({match_expression(words)})"
    if filed:
        expression = f"chat : {chat_key(chat_id)} AND ({expression})"
    weights = ", ".join(str(w) for w in COLUMN_WEIGHTS)
    rows = db.execute(
        f"SELECT rowid, bm25(recall_index, {weights}) AS rank FROM recall_index "
        "WHERE recall_index MATCH ? ORDER BY rank LIMIT ?",
        (expression, limit),
    ).fetchall()
    # bm25() is lower for a better match: negated, a higher score is better.
    return [Hit(int(rowid), -float(rank)) for rowid, rank in rows]


class MemoryIndex:
    """The same index, in memory, for a chat outside the store (a chat file): one row per
    message, by its place in the chat. A changed message is written again (`update`); a list
    that changed other than at its end is read again whole (`load`)."""

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(
            "CREATE VIRTUAL TABLE recall_index USING fts5("
            "chat, text, recap, scene, tokenize = 'porter unicode61 remove_diacritics 2')"
        )
        self.count = 0
        """How many messages it holds (rows 1..count are messages 0..count-1)."""

    def load(self, rows: list[tuple[str, str, str]]) -> None:
        """Hold these messages' (text, recap, scene recap), in chat order, and nothing else."""
        with self._db:
            self._db.execute("DELETE FROM recall_index")
            self._insert(0, rows)
        self.count = len(rows)

    def append(self, rows: list[tuple[str, str, str]]) -> None:
        """Messages added at the end."""
        with self._db:
            self._insert(self.count, rows)
        self.count += len(rows)

    def update(self, index: int, row: tuple[str, str, str]) -> None:
        """Message `index` changed."""
        with self._db:
            self._db.execute("DELETE FROM recall_index WHERE rowid = ?", (index + 1,))
            self._insert(index, [row])

    def search(self, query: str, limit: int = 50) -> list[tuple[int, float]]:
        """(message index, score) of the best matches, best first."""
        return [
            (hit.message_id - 1, hit.score)
            for hit in search(self._db, "", query, limit, filed=False)
        ]

    def _insert(self, first: int, rows: list[tuple[str, str, str]]) -> None:
        self._db.executemany(
            "INSERT INTO recall_index (rowid, chat, text, recap, scene) VALUES (?, '', ?, ?, ?)",
            [(first + i + 1, *row) for i, row in enumerate(rows)],
        )
