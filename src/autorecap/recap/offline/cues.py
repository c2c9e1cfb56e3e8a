"""Where scenes start, from the cues that mark a new scene in chats of every kind. No model.

Each message after the first gets a score from the cues it shows, and the strongest ones, at
least a minimum scene length apart, become scene starts (`pick_scene_starts`). The cues:

- **a pause** between two messages, in absolute terms (an hour counts a little, a day a lot,
  whatever the rest of the chat looks like), and, where a chat's messages are usually close
  together, relative to its usual pace;
- **a time phrase** opening the message ("The next morning", "Three days later", "That night"),
  or a dateline opening narration ("Station 6, 4:50 a.m.", "Christmas Eve.");
- **a separator or heading** ("* * *", "---", "[Time skip]", "Chapter 3");
- **an out-of-character request** to skip ahead, just before ("(OOC: let's skip to the city)");
- **a narrator** stepping in, or in a chat of two that takes turns, **one speaker again**;
- **a session opening**: a greeting, or a catch-up ("since we last talked"), after a closing
  ("talk soon!") or on its own;
- **a plan**: the message before the one before ends on a meeting agreed ("Nine o'clock.",
  "meet me at the big clock at three", "tomorrow, my office"), one reply has followed: weak
  alone, it is where an undated dialogue goes next;
- **a new place**: the opening names a place (a tavern, the docks, Port Anvil) that the last
  messages did not, or tells of arriving somewhere;
- **a change of cast**: other speakers before and after (group chats);
- **a card's status block** that gives another place or another day than the last one
  (`core.status_blocks`: "📍 Location: ... 🕐 Time: Day 3");
- **a change of topic**: the words of the messages after differ from those before, measured
  as a dip in similarity against the peaks around it (TextTiling).

A pause, a time phrase, a separator or a skip request is enough on its own; weaker cues count
when they come together. A long pause (`SESSION_PAUSE`) starts a new session even a few
messages after the last one: a texting chat's sessions are often shorter than the minimum
scene length that keeps the other cues apart. So does a goodbye ("speak later" / "x") followed
by its speaker writing again, where the proxy sees no date. The names and dates that a chat
lacks (the proxy sees neither) simply give no cue.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise

from autorecap.core.dates import as_utc
from autorecap.pacing import pause
from autorecap.recap.offline.openings import (
    CATCH_UP,
    CLOSING,
    DATELINE,
    DATELINE_REACH,
    GREETING,
    NEWS_OPENER,
    OUT_OF_CHARACTER,
    PLAN,
    PLAN_REACH,
    SEPARATOR,
    SKIP_REQUEST,
    TIME_JUMP,
    TIME_POINT,
    WAKING,
)
from autorecap.recap.offline.places import MARKUP, SPACE, STOP, WORD, place_score

THRESHOLD = 2.5
"""The score a message needs to open a scene."""
UNDATED_THRESHOLD = 2.0
"""The same for a chat with no send dates (as the proxy sees SillyTavern's): the pause cue, the
strongest, can never fire there, so the other cues need less to agree on (on the dev corpora's
undated views, breaks found went from 55% to 66% for 13 more extra among 115)."""


PAUSE_FLOOR = 20 * 60
"""Seconds between two messages below which a pause tells nothing."""
SESSION_PAUSE = 3 * 3600
"""A pause this long, and ten times the chat's usual one when it has one, starts a session."""
SESSION_LENGTH = 2
"""The fewest messages between a session's start and another scene start: "passed my
probation" / "congrats!!", then silence for a week, is a session of its own."""


def threshold_for(turns: Sequence[Turn]) -> float:
    """`THRESHOLD`, or `UNDATED_THRESHOLD` when the send dates tell nothing (most messages
    with none, or with the same moment, and no pause anywhere: a history the proxy received at
    once, and the few messages dated since) in a chat of two. A group chat keeps `THRESHOLD`:
    its changes of cast are a cue that a chat of two lacks (on the dev group chats with no
    dates, as many breaks found with 14 extra instead of 22)."""
    gaps = [g for g in _gaps(turns) if g is not None]
    pairs = max(1, len(turns) - 1)
    if any(g >= PAUSE_FLOOR for g in gaps) or sum(g >= 1 for g in gaps) >= pairs / 2:
        return THRESHOLD
    if main_cast(turns) > 2:
        return THRESHOLD
    return UNDATED_THRESHOLD


CAMEO_SHARE = 0.05
"""A speaker with fewer of a chat's messages than this share (or than 3) only looks in: a
chat of two with a ship's captain on the radio twice is still a chat of two."""


def main_cast(turns: Sequence[Turn]) -> int:
    """How many speakers carry the chat: those with at least `CAMEO_SHARE` of its messages."""
    counts = Counter(turn.speaker for turn in turns if _cast(turn))
    least = max(3, CAMEO_SHARE * sum(counts.values()))
    return sum(1 for n in counts.values() if n >= least)


@dataclass(frozen=True)
class Turn:
    """What the cues read of one message."""

    text: str
    speaker: str = ""
    narrator: bool = False
    hidden: bool = False
    time: datetime | None = None
    hint: bool = False
    """An LLM that recapped the message said it opens a new scene."""
    status_place: str = ""
    """Where the message's status block says the scene is (`core.status_blocks`), if any."""
    status_day: str = ""
    """The day its status block gives ("day 3", "may 8"), if any."""


@dataclass(frozen=True)
class BreakCandidate:
    """A message that may open a new scene: its score and the cues that gave it."""

    index: int
    score: float
    cues: tuple[str, ...] = ()
    session: bool = False
    """It comes after a pause that starts a session (`SESSION_PAUSE`), or after a goodbye with
    its speaker writing again."""

    @property
    def cue(self) -> bool:
        """True when a cue strong enough on its own fired."""
        return any(c in _STRONG for c in self.cues)


_STRONG = frozenset({"pause", "time", "separator", "skip", "llm"})


WEIGHTS: dict[str, float] = {
    "pause": 1.0,
    "time": 1.0,
    "separator": 1.0,
    "skip": 1.0,
    "narrator": 1.0,
    "greeting": 1.0,
    "catch-up": 1.0,
    "news": 1.0,
    "closing": 1.0,
    "place": 1.0,
    "cast": 1.0,
    "topic": 1.0,
    "again": 1.0,
    "llm": 1.0,
    "plan": 1.0,
}
"""How much each cue counts (each cue's value is already on the threshold's scale)."""


def score_scene_starts(turns: Sequence[Turn], *, window: int = 0) -> list[BreakCandidate]:
    """How likely each message is to open a new scene (index 0 never is). `window`: messages on
    each side compared by the topic cue (0: as many as hold about 40 content words)."""
    count = len(turns)
    if count < 2:
        return []
    openings = [_opening(turn.text) for turn in turns]
    bags = [_content(turn.text) for turn in turns]
    vocabulary = [frozenset(WORD.findall(turn.text.lower())) for turn in turns]
    if not window:
        words_each = sum(sum(b.values()) for b in bags) / count
        window = max(3, min(10, round(40 / max(words_each, 1.0))))
    topic = _topic_dips(bags, window)
    gaps = _gaps(turns)
    typical = _typical_gap(gaps)
    again = _again_value(turns)
    speech = _speech_only(turns)
    last_speaker = turns[0].speaker if _cast(turns[0]) else None  # of the last cast message
    last_status = turns[0]  # the last message with a status block
    scored: list[BreakCandidate] = []
    for index in range(1, count):
        if index % 128 == 0:
            pause()
        turn, before = turns[index], turns[index - 1]
        if turn.hidden:  # a hidden note opens nothing (its skip request counts for the next)
            scored.append(BreakCandidate(index, 0.0))
            continue
        cues: dict[str, float] = {}
        gap = gaps[index]
        if gap is not None and gap > 0:
            cues["pause"] = _pause_score(gap, typical)
        session = gap is not None and gap >= max(SESSION_PAUSE, 10 * (typical or 0.0))
        opening = openings[index]
        # A time phrase in speech ("This morning, I...", quoted or in a chat of speech alone)
        # moves the story less often than one in narration ("*The next morning...*").
        spoken = 0.6 if speech or turn.text.lstrip(" *_")[:1] in '"“«„' else 1.0
        if TIME_JUMP.search(opening):
            cues["time"] = 3.0 * spoken
        elif (
            TIME_POINT.search(opening)
            or WAKING.search(opening[:100])
            or (not speech and _narrated(turn.text) and DATELINE.search(opening[:DATELINE_REACH]))
        ):
            cues["time"] = 2.0 * spoken
        if SEPARATOR.search(turn.text):
            cues["separator"] = 3.5
        if before.hidden and OUT_OF_CHARACTER.search(before.text):
            if SKIP_REQUEST.search(before.text):
                cues["skip"] = 3.0
        elif OUT_OF_CHARACTER.search(turn.text[:80]) and SKIP_REQUEST.search(turn.text[:200]):
            cues["skip"] = 2.0
        if index > 1 and PLAN.search(turns[index - 2].text[-PLAN_REACH:]):
            cues["plan"] = 0.8  # a meeting agreed ("Nine o'clock."), a reply, then there
        if turn.narrator and not before.narrator:
            cues["narrator"] = 1.0
        elif again and _cast(turn) and turn.speaker == last_speaker:
            cues["again"] = again  # a hidden note between ("brb, dinner") is no turn
        if turn.hint:
            cues["llm"] = 3.0
        cues.update(
            _session_cues(
                opening, turn, before, openings[index - 1], turns[index - 2] if index > 1 else None
            )
        )
        seen: set[str] = set().union(*vocabulary[max(0, index - 8) : index])
        place = place_score(turn.text, opening, seen)
        if place:
            cues["place"] = place
        if turn.status_place or turn.status_day:
            for name, value in _status_cues(turn, last_status).items():
                cues[name] = max(cues.get(name, 0.0), value)
            last_status = turn
        cast = _cast_change(turns, index, window)
        if cast:
            cues["cast"] = cast
        if topic[index]:
            # The words after the last messages are not written yet: a dip there is half seen.
            cues["topic"] = topic[index] * min(1.0, (count - index) / window)
        if _cast(turn):
            last_speaker = turn.speaker
        kept = {name: WEIGHTS[name] * value for name, value in cues.items() if value > 0}
        score = sum(kept.values())
        names = tuple(sorted(kept, key=lambda k: -kept[k]))
        # A goodbye, then the same one writing again: the next day's first message, though
        # the proxy sees no date ("speak later" / "x" / "did he say anything funny?").
        session = session or ("closing" in kept and "again" in kept and score >= THRESHOLD)
        scored.append(BreakCandidate(index, score, names, session))
    return scored


STATUS_PLACE = 1.5
"""A status block's place that is not the last one's: a hint (a tracker follows its characters
from room to room too), worth a place named in the opening."""
STATUS_DAY = 2.0
"""A status block's day that is not the last one's ("Day 3" after "Day 2"): as good as a time
phrase that names a moment."""


def _status_cues(turn: Turn, last: Turn) -> dict[str, float]:
    """The cues of a message's status block against the last one before it: a new place, a new
    day (none against a message with no status block)."""
    cues: dict[str, float] = {}
    if turn.status_place and last.status_place and turn.status_place != last.status_place:
        cues["place"] = STATUS_PLACE
    if turn.status_day and last.status_day and turn.status_day != last.status_day:
        cues["time"] = STATUS_DAY
    return cues


TAKING_TURNS = 0.3
"""The share of messages after the same speaker's own at which speaking again tells nothing."""


def _again_value(turns: Sequence[Turn]) -> float:
    """What one speaker speaking twice running is worth in this chat: in a chat of two that
    mostly takes turns, the one who speaks again opens a new conversation or narrates a new
    scene (on the dev corpora, 7 of 7 such messages in a narrated chat and 13 of 86 in a
    texting one open a scene); the more often it happens, the less it tells, and nothing in a
    group chat, where it is ordinary."""
    cast = [turn for turn in turns if _cast(turn)]
    if len(cast) < 20 or main_cast(turns) != 2:
        return 0.0
    repeats = sum(1 for a, b in pairwise(cast) if a.speaker == b.speaker)
    return max(0.0, 1.0 - repeats / (len(cast) - 1) / TAKING_TURNS)


def pick_scene_starts(
    candidates: Sequence[BreakCandidate],
    *,
    count: int,
    minimum_length: int,
    threshold: float = THRESHOLD,
    first_allowed: int = 1,
    last_allowed: int | None = None,
    existing_starts: Sequence[int] = (),
) -> list[int]:
    """The best candidates at or above the threshold, each at least `minimum_length` messages
    from another start (and from the chat's start), strongest first; a session's start
    (`BreakCandidate.session`) at least `SESSION_LENGTH`."""
    last = count - 1 if last_allowed is None else last_allowed
    chosen: list[int] = list(existing_starts)
    for candidate in sorted(candidates, key=lambda c: (-c.score, c.index)):
        if candidate.score < threshold:
            break
        index = candidate.index
        least = min(minimum_length, SESSION_LENGTH) if candidate.session else minimum_length
        if not first_allowed <= index <= last or index < least:
            continue
        if any(abs(index - other) < least for other in chosen):
            continue
        chosen.append(index)
    return sorted(set(chosen) - set(existing_starts))


NARRATION_WORDS = 40
"""A message this long, or opening with markup, is narration: a time it opens with sets a
scene there, while in a short chat message ("friday the 15th if it dries") it is news."""


SPEECH_ONLY_SHARE = 0.05
"""In a chat where fewer messages than this share hold markup or quotes, every line is speech:
a time phrase counts as in quoted speech, and a long line is no narration with a dateline (on
a new dev dialogue-only chat, 2 fewer extra breaks and 2 more found through the proxy's eyes;
the dev and generated sets the same within one break)."""


def _speech_only(turns: Sequence[Turn]) -> bool:
    """Whether the chat is speech alone (texting, dialogue-only roleplay)."""
    said = [turn.text for turn in turns if not turn.hidden and not turn.narrator]
    marked = sum(1 for text in said if "*" in text or any(q in text for q in '"“”«»„'))
    return len(said) >= 20 and marked < SPEECH_ONLY_SHARE * len(said)


def _narrated(text: str) -> bool:
    start = text.lstrip()
    return start[:1] in "*_" or (start[:1] not in '"“«„' and len(text.split()) >= NARRATION_WORDS)


def _opening(text: str) -> str:
    """The start of a message as the cues read it: markup and leading blanks gone."""
    return SPACE.sub(" ", MARKUP.sub("", text[:400])).strip()[:220]


def _content(text: str) -> Counter[str]:
    """The message's content words (plurals folded), for the topic cue."""
    bag: Counter[str] = Counter()
    for word in WORD.findall(text.lower()):
        if len(word) < 3 or word in STOP:
            continue
        if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        bag[word] += 1
    return bag


def _gaps(turns: Sequence[Turn]) -> list[float | None]:
    gaps: list[float | None] = [None]
    previous: datetime | None = None
    for turn in turns[1:]:
        current = turn.time
        gaps.append(
            (as_utc(current) - as_utc(previous)).total_seconds()
            if current is not None and previous is not None
            else None
        )
        previous = current if current is not None else previous
    if turns and turns[0].time is not None:
        gaps[1:2] = gaps[1:2]  # the first gap is measured from message 0 as above
    return gaps


def _typical_gap(gaps: Sequence[float | None]) -> float | None:
    """The median pause between messages, when most messages have one (a chat exported by
    session gives its messages one time each: then there is no usual pace)."""
    positive = sorted(g for g in gaps if g is not None and g > 0)
    if len(positive) < max(8, len(gaps) // 2):
        return None
    return positive[len(positive) // 2]


def _pause_score(gap: float, typical: float | None) -> float:
    """Half an hour: a hint; three hours: enough alone; a day or more: certain."""
    absolute = 0.0 if gap < PAUSE_FLOOR else min(4.5, 1.0 + 1.6 * math.log10(gap / PAUSE_FLOOR))
    relative = 0.0
    if typical:
        relative = max(0.0, min(1.5, 0.75 * (math.log10(gap / typical) - 1.0)))
    return absolute + relative


ACKNOWLEDGED_WORDS = 4
"""A message this short after a goodbye answers it ("will do", "x", "same here mate"): the
conversation is over after it. Measured with `autorecap eval` with the sign-offs below (a
goodbye, then the same one writing again, starts a session): breaks found in the dev chats
through the proxy's eyes 182 -> 186 of 280 (48 extra either way), dialogue 24 -> 25 of 37
(7 -> 6 extra), texting 65 of 65 (2 -> 3 extra)."""


def _session_cues(
    opening: str, turn: Turn, before: Turn, opening_before: str, earlier: Turn | None
) -> dict[str, float]:
    """A conversation that starts again: a greeting (not the answer to one), a catch-up, news
    blurted out, after a goodbye (or after the few words that answer one: "speak later" /
    "x")."""
    cues: dict[str, float] = {}
    answered = before.speaker != turn.speaker or not turn.speaker
    if GREETING.search(opening) and not (GREETING.search(opening_before) and answered):
        cues["greeting"] = 1.8
    if CATCH_UP.search(opening[:160]) and not CATCH_UP.search(opening_before[:160]):
        cues["catch-up"] = 2.6
    if NEWS_OPENER.search(opening):
        cues["news"] = 1.0
    if CLOSING.search(before.text[-80:].lower()) or (
        earlier is not None
        and len(before.text.split()) <= ACKNOWLEDGED_WORDS
        and not before.text.rstrip().endswith("?")
        and CLOSING.search(earlier.text[-80:].lower())
    ):
        cues["closing"] = 1.4
    return cues


def _cast_change(turns: Sequence[Turn], index: int, window: int) -> float:
    before = {t.speaker for t in turns[max(0, index - window) : index] if _cast(t)}
    after = {t.speaker for t in turns[index : index + window] if _cast(t)}
    if len(before | after) <= 2 or not before or not after:
        return 0.0  # two people talking: their turns say nothing of scenes
    overlap = len(before & after) / len(before | after)
    return round(1.5 * (1.0 - overlap), 2) if overlap < 0.75 else 0.0


def _cast(turn: Turn) -> bool:
    """Whether a message shows who is in the scene (a narrator or a hidden note does not)."""
    return not turn.hidden and not turn.narrator


def _topic_dips(bags: Sequence[Counter[str]], window: int) -> list[float]:
    """A score from 0 to 1.5 per message for how deep the similarity of the words before and
    after it dips below the peaks on either side (TextTiling's depth score), relative to the
    chat's own dips."""
    count = len(bags)
    documents: Counter[str] = Counter()
    for bag in bags:
        documents.update(bag.keys())
    weight = {w: math.log((count + 1) / (n + 0.5)) for w, n in documents.items()}
    similarity = [0.0] * count
    left: Counter[str] = Counter()
    right: Counter[str] = Counter()
    for bag in bags[:window]:
        right.update(bag)
    for index in range(1, count):
        left.update(bags[index - 1])
        if index - 1 - window >= 0:
            _remove(left, bags[index - 1 - window])
        _remove(right, bags[index - 1])
        if index + window - 1 < count:
            right.update(bags[index + window - 1])
        similarity[index] = _cosine(left, right, weight)
    depths = [0.0] * count
    for index in range(1, count):
        value = similarity[index]
        peak_left = value
        for j in range(index - 1, 0, -1):
            if similarity[j] < peak_left:
                break
            peak_left = similarity[j]
        peak_right = value
        for j in range(index + 1, count):
            if similarity[j] < peak_right:
                break
            peak_right = similarity[j]
        depths[index] = (peak_left - value) + (peak_right - value)
    positive = [d for d in depths if d > 0]
    if len(positive) < 3:
        return [0.0] * count
    mean = sum(positive) / len(positive)
    spread = math.sqrt(sum((d - mean) ** 2 for d in positive) / len(positive)) or 1.0
    return [round(max(0.0, min(1.5, 0.75 * (d - mean) / spread)), 3) for d in depths]


def _remove(window: Counter[str], bag: Counter[str]) -> None:
    """Take a message's words out of a window (words that leave it entirely are deleted, so
    a window stays the size of its messages)."""
    for word, count in bag.items():
        left = window[word] - count
        if left > 0:
            window[word] = left
        else:
            del window[word]


def _cosine(a: Counter[str], b: Counter[str], weight: dict[str, float]) -> float:
    if len(a) > len(b):
        a, b = b, a
    dot = 0.0
    for word, n in a.items():
        if n > 0:
            m = b.get(word, 0)
            if m > 0:
                dot += n * m * weight[word] ** 2
    if not dot:
        return 0.0
    norm_a = math.sqrt(sum((n * weight[w]) ** 2 for w, n in a.items() if n > 0))
    norm_b = math.sqrt(sum((n * weight[w]) ** 2 for w, n in b.items() if n > 0))
    return dot / (norm_a * norm_b) if norm_a and norm_b else 0.0
