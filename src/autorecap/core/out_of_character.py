"""Notes out of character: what a player writes about the game, not the story ("(OOC: brb,
dinner)", "((loving this!))", a line opening with "OOC:" or "//"), a card's status block
before or after a reply (`core.status_blocks`), and a model's thinking left in its reply
("<think>...</think>", "<thinking>", an HTML comment), which SillyTavern keeps in the text
when it does not parse reasoning out. Recaps and recall leave them out, and the HTML tags
of a styled reply (its words stay).

May import: core.status_blocks.
"""

from __future__ import annotations

import re

from autorecap.core.status_blocks import without_status

_NOTE = re.compile(
    # an unclosed note runs to the end of its line, not of the message
    r"\(\s*ooc\b[^)\n]*\)?|\[\s*ooc\b[^\]\n]*\]?|\(\((?:[^()\n]|\([^()\n]*\))*\)\)?"
    r"|^[ \t]*(?:ooc\s*[:-]|//).*$",
    re.IGNORECASE | re.MULTILINE,
)


_THOUGHT = re.compile(
    r"<\s*(think|thinking|thoughts?|reasoning|scratchpad)\s*>.*?<\s*/\s*\1\s*>|<!--.*?-->",
    re.IGNORECASE | re.DOTALL,
)


_TAG = re.compile(r"<\s*(/?)\s*([a-zA-Z][\w-]*)(?:\s[^<>]*)?/?>")
_BREAKING = frozenset({"br", "p", "div", "li", "tr", "hr", "h1", "h2", "h3", "h4", "blockquote"})


def without_thoughts(text: str) -> str:
    """`text` without a model's thinking (the whole text when it is only that)."""
    if "<" not in text:
        return text
    return _THOUGHT.sub(" ", text).strip() or text


def without_tags(text: str) -> str:
    """`text` without HTML tags, what they hold kept (a tag that breaks a line as a line
    break): a styled reply ("<div style=...>She draws her sword.</div>") recaps as its words.
    After `without_status`, which reads a tag as a tracker's mark."""
    if "<" not in text:
        return text
    plain = _TAG.sub(lambda m: "\n" if m.group(2).lower() in _BREAKING else "", text)
    return plain.strip() or text


def in_character(text: str) -> str:
    """`text` without its notes out of character (each left as a space), a model's thinking,
    its status blocks and HTML tags."""
    text = without_thoughts(text)
    text = without_status(text) or text  # a message that is only a status block keeps it
    text = without_tags(text)
    if "(" not in text and "[" not in text and "ooc" not in text.lower() and "//" not in text:
        return text
    return _NOTE.sub(" ", text)


def recapped_text(text: str) -> str:
    """What a message's recap is made of: its text without notes out of character, or the
    whole text when it is only a note (every included message has a recap)."""
    said = in_character(text)
    return said if said.strip() else text
