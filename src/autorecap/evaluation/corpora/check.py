"""Check a corpus script (`*.chat.txt`, see README.md): `python corpora/check.py FILE...`.

Prints each file's messages, scenes, questions and planted facts, and every problem found:
a line that is not `Name: text`, a time that goes backwards, a planted fact that is not in
exactly one message. Exits 1 when a file has a problem.
"""

from __future__ import annotations

import re
import sys
from datetime import datetime, timedelta
from pathlib import Path

_HEADER = re.compile(r"^#\s*(\w+)\s*:\s*(.*)$")
_MESSAGE = re.compile(r"^(\(hidden\) )?([^:\n]{1,60}):\s?(.*)$")
_RELATIVE = re.compile(r"^\+(\d+)([mhd])$")


def check(path: Path) -> list[str]:
    problems: list[str] = []
    header: dict[str, str] = {}
    messages: list[tuple[str, str, bool]] = []
    scenes = 0
    questions: list[list[str]] = []
    when: datetime | None = None
    in_questions = False
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.rstrip()
        if not line.strip():
            continue
        if in_questions:
            key, _, value = line.partition(":")
            if key not in ("Q", "A", "F"):
                problems.append(f"line {number}: expected Q:, A: or F:, got {line[:40]!r}")
            elif key == "Q":
                questions.append([value.strip(), "", ""])
            elif not questions:
                problems.append(f"line {number}: {key}: before any Q:")
            else:
                questions[-1][1 if key == "A" else 2] = value.strip()
            continue
        if line.startswith("--- questions"):
            in_questions = True
            continue
        match = _HEADER.match(line)
        if match and not messages and not scenes:
            header[match.group(1)] = match.group(2).strip()
            continue
        if line.startswith("==="):
            scenes += 1
            spec = line[3:].strip()
            relative = _RELATIVE.match(spec)
            if spec in ("", "same"):
                pass
            elif relative:
                amount, unit = int(relative.group(1)), relative.group(2)
                step = {"m": 60, "h": 3600, "d": 86400}[unit]
                if when is None:
                    problems.append(f"line {number}: a relative time before any absolute one")
                else:
                    when += timedelta(seconds=amount * step)
            else:
                try:
                    new = datetime.strptime(spec, "%Y-%m-%d %H:%M")
                except ValueError:
                    problems.append(f"line {number}: bad time {spec!r}")
                else:
                    if when is not None and new < when:
                        problems.append(f"line {number}: time goes backwards ({spec})")
                    when = new
            continue
        if not scenes:
            problems.append(f"line {number}: a message before the first === line")
            continue
        match = _MESSAGE.match(line)
        if not match:
            problems.append(f"line {number}: not 'Name: text': {line[:50]!r}")
            continue
        messages.append((match.group(2).strip(), match.group(3), bool(match.group(1))))
    for key in ("title", "style", "user", "char", "dates"):
        if key not in header:
            problems.append(f"header: missing '# {key}: ...'")
    for question, answer, fact in questions:
        if not answer:
            problems.append(f"question without an answer: {question!r}")
        if fact.lower() == "yes":
            # Case aside, as `autorecap eval` counts a planted fact found.
            wanted = answer.lower()
            holders = [i for i, (_, text, _) in enumerate(messages) if wanted in text.lower()]
            if len(holders) != 1:
                problems.append(
                    f"planted fact {answer!r} is in {len(holders)} messages (must be exactly 1)"
                )
    facts = sum(1 for q in questions if q[2].lower() == "yes")
    names = sorted({name for name, _, _ in messages})
    words = sum(len(text.split()) for _, text, _ in messages)
    print(
        f"{path.name}: {len(messages)} messages, {scenes} scenes, {len(questions)} questions "
        f"({facts} planted facts), {words} words, speakers {names}"
    )
    return problems


def main() -> int:
    failed = False
    for name in sys.argv[1:]:
        for problem in check(Path(name)):
            failed = True
            print(f"  problem: {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
