"""Evaluation chats with their truth: where scenes start, and questions about the chat's past.

Three sources, one shape (`CorpusChat`):
- corpus scripts (`*.chat.txt`, the format in `corpora/README.md`), the chats written for this
  project, shipped in `autorecap/evaluation/corpora/{dev,heldout}`;
- any SillyTavern chat file with a `NAME.truth.json` beside it (`{"scene_starts": [...],
  "questions": [{"question", "answer", "planted"}]}`), for chats written elsewhere;
- the seeded generator (`autorecap.testing.generate`).

`proxy_view` turns any of them into what the proxy stores of the same chat: roles only (no
names, no dates; a group's characters named before their text, as SillyTavern sends them),
hidden messages left out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from autorecap.core.model import Chat
from autorecap.errors import AutorecapError, ChatFileError
from autorecap.stfiles.jsonl import read_chat
from autorecap.testing import GeneratedChat, generate

CORPORA = Path(__file__).parent / "corpora"
"""The corpora shipped with the package: `dev/` (tuned on) and `heldout/` (only measured)."""

_HEADER = re.compile(r"^#\s*(\w+)\s*:\s*(.*)$")
_MESSAGE = re.compile(r"^(\(hidden\) )?([^:\n]{1,60}):\s?(.*)$")
_RELATIVE = re.compile(r"^\+(\d+)([mhd])$")
_UNIT_S = {"m": 60, "h": 3600, "d": 86400}
DATE_FORMS = ("locomo", "st", "iso", "epoch", "none")


class CorpusError(AutorecapError):
    """A corpus file that cannot be read: the message names the file, the line and the fix."""


@dataclass(frozen=True)
class Question:
    """A question about the chat's past, with its short answer. A planted answer appears word
    for word in exactly one message."""

    question: str
    answer: str
    planted: bool = False


@dataclass
class CorpusChat:
    """One evaluation chat and its truth."""

    name: str
    style: str
    source: str
    """"dev", "heldout", "generated" or "file"."""
    chat: Chat
    scene_starts: list[int] = field(default_factory=list)
    """Indexes of the messages that open a new scene (never 0)."""
    questions: list[Question] = field(default_factory=list)


def read_script(path: Path, *, source: str = "file") -> CorpusChat:
    """Read a corpus script (`*.chat.txt`)."""
    header: dict[str, str] = {}
    rows: list[tuple[str, str, bool, datetime | None]] = []
    starts: list[int] = []
    questions: list[Question] = []
    when: datetime | None = None
    step = 0
    in_questions = False
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:
        raise CorpusError(
            f"{path.name} is not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip()
        if not line.strip():
            continue
        where = f"line {number} of {path.name}"
        if in_questions:
            key, _, value = line.partition(":")
            if key == "Q":
                questions.append(Question(value.strip(), ""))
            elif key in ("A", "F") and questions:
                last = questions[-1]
                questions[-1] = (
                    replace(last, answer=value.strip())
                    if key == "A"
                    else replace(last, planted=value.strip().lower() == "yes")
                )
            else:
                raise CorpusError(f"{where}: expected 'Q:', 'A:' or 'F:' after '--- questions'")
            continue
        if line.startswith("--- questions"):
            in_questions = True
            continue
        match = _HEADER.match(line)
        if match and not rows and when is None and not starts:
            header[match.group(1)] = match.group(2).strip()
            step_text = header.get("step", "0") or "0"
            if not step_text.isdigit():
                raise CorpusError(f"{where}: '# step:' takes whole seconds, as '# step: 30'")
            step = int(step_text)
            continue
        if line.startswith("==="):
            when = _scene_time(line[3:].strip(), when, where)
            if rows:
                starts.append(len(rows))
            continue
        match = _MESSAGE.match(line)
        if not match:
            raise CorpusError(f"{where}: expected 'Name: text', '=== WHEN' or '# key: value'")
        if rows and step and when is not None and rows[-1][3] is not None:
            when = max(when, rows[-1][3] + timedelta(seconds=step))
        text = match.group(3).replace("\\n", "\n")
        rows.append((match.group(2).strip(), text, bool(match.group(1)), when))
    for key in ("style", "user", "char", "dates"):
        if key not in header:
            raise CorpusError(f"{path.name}: the header needs '# {key}: ...'")
    dates = header["dates"]
    if dates not in DATE_FORMS:
        raise CorpusError(f"{path.name}: '# dates:' must be one of {', '.join(DATE_FORMS)}")
    chat = _build_chat(path.name.removesuffix(".chat.txt"), header, rows, dates)
    name = path.name.removesuffix(".chat.txt")
    return CorpusChat(name, header["style"], source, chat, starts, questions)


class _TruthQuestion(BaseModel):
    question: str
    answer: str
    planted: bool = False


class _Truth(BaseModel):
    """`NAME.truth.json`: the format in `corpora/README.md`."""

    scene_starts: list[int] = []
    questions: list[_TruthQuestion] = []
    style: str | None = None


_TRUTH_FORMAT = (
    '{"scene_starts": [12, 40], "questions": [{"question": "...", "answer": "...", '
    '"planted": false}], "style": "sessions"} (see autorecap/evaluation/corpora/README.md)'
)


def read_with_truth(path: Path, *, style: str = "file") -> CorpusChat:
    """A SillyTavern chat file and the `NAME.truth.json` beside it."""
    truth_path = path.with_name(path.name.removesuffix(".jsonl") + ".truth.json")
    if not truth_path.exists():
        raise CorpusError(f"{path.name} has no {truth_path.name} beside it: {_TRUTH_FORMAT}")
    try:
        truth = _Truth.model_validate_json(truth_path.read_bytes())
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        raise CorpusError(
            f"{truth_path.name}: {where}: {first['msg']}. The format: {_TRUTH_FORMAT}"
        ) from None
    try:
        chat = read_chat(path)
    except ChatFileError as error:
        bad = error.problems[0] if error.problems else None
        where = f"line {bad.line}: {bad.message}" if bad else str(error)
        raise CorpusError(
            f"{path.name}, {where}: fix it to measure the chat "
            f"(`autorecap check {path}` lists every bad line)"
        ) from None
    count = len(chat.messages)
    for start in truth.scene_starts:
        if not 0 < start < count:
            raise CorpusError(
                f"{truth_path.name}: scene_starts holds {start}, but a scene start is the index "
                f"of the message that opens a scene, from 1 to {count - 1} in this chat"
            )
    if len(set(truth.scene_starts)) != len(truth.scene_starts):
        raise CorpusError(f"{truth_path.name}: scene_starts holds an index twice")
    questions = [Question(q.question, q.answer, q.planted) for q in truth.questions]
    starts = sorted(truth.scene_starts)
    return CorpusChat(chat.id, truth.style or style, "file", chat, starts, questions)


def load_corpora(directory: Path, *, source: str | None = None) -> list[CorpusChat]:
    """Every corpus chat in a folder (scripts, and chat files with truth), sorted by name."""
    if not directory.is_dir():
        raise CorpusError(f"no folder {directory}: give a folder of *.chat.txt or *.jsonl files")
    found: list[CorpusChat] = []
    for path in sorted(directory.iterdir()):
        if path.name.endswith(".chat.txt"):
            found.append(read_script(path, source=source or directory.name))
        elif path.suffix == ".jsonl":
            found.append(read_with_truth(path))
    return found


def shipped(which: str) -> list[CorpusChat]:
    """The corpora shipped with the package: `which` is "dev" or "heldout"."""
    return load_corpora(CORPORA / which, source=which)


def from_generated(generated: GeneratedChat, style: str, name: str) -> CorpusChat:
    """A generated chat as a corpus chat: its scenes' starts, its planted facts as questions."""
    starts = [scene.start for scene in generated.scenes[1:]]
    questions = [Question(f.question, f.answer, planted=True) for f in generated.facts]
    return CorpusChat(name, style, "generated", generated.chat, starts, questions)


def proxy_view(corpus: CorpusChat) -> CorpusChat:
    """The chat as the proxy stores it: `User`/`Assistant`, no dates, no hidden messages
    (scene starts moved to match). A narrator message stays one, named `System`: SillyTavern
    sends it with the `system` role, which the proxy stores as a narrator message. In a group
    chat each character's message opens with its name ("Mae: ..."), as SillyTavern sends a
    group's messages; its view is the style "group proxy"."""
    chat = Chat(chat_id=f"{corpus.chat.id}-proxy", header={"chat_metadata": {}})
    kept_index: dict[int, int] = {}
    cast = {m.name for m in corpus.chat.messages if not m.is_user and not m.is_narrator}
    group = len(cast) > 1
    for index, message in enumerate(corpus.chat.messages):
        if message.is_hidden:
            continue
        kept_index[index] = len(chat.messages)
        narrator = message.is_narrator and not message.is_user
        named = group and not narrator and not message.is_user
        chat.append(
            {
                "name": "System" if narrator else "User" if message.is_user else "Assistant",
                "is_user": message.is_user,
                "is_system": False,
                "mes": f"{message.name}: {message.text}" if named else message.text,
                "extra": {"type": "narrator"} if narrator else {},
            }
        )
    starts: list[int] = []
    for start in corpus.scene_starts:
        # A hidden message that opened a scene: the next kept one opens it.
        later = [kept_index[i] for i in range(start, len(corpus.chat.messages)) if i in kept_index]
        if later and later[0] > 0 and later[0] not in starts:
            starts.append(later[0])
    style = "group proxy" if group else "proxy"
    return CorpusChat(
        f"{corpus.name}-proxy", style, corpus.source, chat, starts, list(corpus.questions)
    )


def _scene_time(spec: str, when: datetime | None, where: str) -> datetime | None:
    if spec in ("", "same"):
        return when
    relative = _RELATIVE.match(spec)
    if relative:
        if when is None:
            raise CorpusError(f"{where}: '+{spec[1:]}' needs an absolute time before it")
        return when + timedelta(seconds=int(relative.group(1)) * _UNIT_S[relative.group(2)])
    try:
        return datetime.strptime(spec, "%Y-%m-%d %H:%M")
    except ValueError:
        raise CorpusError(
            f"{where}: the time must be YYYY-MM-DD HH:MM, +Nm/+Nh/+Nd or same"
        ) from None


def _build_chat(
    chat_id: str,
    header: dict[str, str],
    rows: list[tuple[str, str, bool, datetime | None]],
    dates: str,
) -> Chat:
    user, char = header["user"], header["char"]
    first = next((when for *_, when in rows if when is not None), None)
    chat_header: dict[str, Any] = {"chat_metadata": {}, "user_name": user, "character_name": char}
    if first is not None and dates != "none":
        chat_header["create_date"] = first.strftime("%Y-%m-%d@%Hh%Mm%Ss")
    chat = Chat(chat_id=chat_id, header=chat_header)
    group = header["style"] == "group"
    for name, text, hidden, when in rows:
        message: dict[str, Any] = {
            "name": name,
            "is_user": name == user,
            "is_system": hidden,
        }
        if when is not None and dates != "none":
            message["send_date"] = format_date(when, dates)
        message["mes"] = text
        # (a card named "Narrator" is the character, as SillyTavern has it)
        narrator = name == "Narrator" and char != "Narrator"
        message["extra"] = {"type": "narrator"} if narrator else {}
        if group and not narrator and name != user:
            message["original_avatar"] = f"{name}.png"
            message["force_avatar"] = f"characters/{name}.png"
        chat.append(message)
    return chat


def format_date(when: datetime, form: str) -> str | int:
    """`when` written as a chat file of that form writes `send_date`."""
    if form == "locomo":  # "1:56 pm on 8 May, 2023"
        hour = when.hour % 12 or 12
        half = "am" if when.hour < 12 else "pm"
        return f"{hour}:{when.minute:02d} {half} on {when.day} {when:%B}, {when.year}"
    if form == "st":  # "May 8, 2023 1:56pm" (SillyTavern before 1.14)
        hour = when.hour % 12 or 12
        half = "am" if when.hour < 12 else "pm"
        return f"{when:%B} {when.day}, {when.year} {hour}:{when.minute:02d}{half}"
    aware = when.replace(tzinfo=UTC)
    if form == "epoch":
        return int(aware.timestamp() * 1000)
    return aware.strftime("%Y-%m-%dT%H:%M:%S.") + f"{aware.microsecond // 1000:03d}Z"


SETS = ("dev", "heldout", "generated")
PROXY_STYLES = frozenset({"narrated", "dialogue", "sessions", "group"})
"""Styles whose proxy view is measured too."""


def generated_chats(seed: int = 0, size: int = 600) -> list[CorpusChat]:
    """Seeded generated chats: a narrated roleplay and a group chat."""
    return [
        from_generated(generate(size, seed=seed), "narrated", f"generated-narrated-{seed}"),
        from_generated(
            generate(size, seed=seed + 1, group=True), "group", f"generated-group-{seed + 1}"
        ),
    ]


def gather(
    sets: Sequence[str] = SETS,
    folders: Sequence[Path] = (),
    *,
    proxy: bool = True,
    seed: int = 0,
) -> list[CorpusChat]:
    """The chats `autorecap eval` measures: the named sets, the chats in `folders`, and (with
    `proxy`) the proxy view of every narrated, dialogue and sessions chat among them."""
    chats: list[CorpusChat] = []
    for name in sets:
        if name not in SETS:
            raise CorpusError(f"unknown set {name!r}: use {', '.join(SETS)}")
        chats.extend(generated_chats(seed) if name == "generated" else shipped(name))
    for folder in folders:
        chats.extend(load_corpora(folder))
    if proxy:
        chats.extend(proxy_view(c) for c in list(chats) if c.style in PROXY_STYLES)
    return chats
