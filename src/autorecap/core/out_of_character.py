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
from functools import lru_cache

from autorecap.core.status_blocks import without_status

_NOTE = re.compile(
    # an unclosed note runs to the end of its line, not of the message
    r"\(\s*ooc\b[^)\n]*\)?|\[\s*ooc\b[^\]\n]*\]?|\(\((?:[^()\n]|\([^()\n]*\))*\)\)?"
    r"|^[ \t]*(?:ooc\s*[:-]|//).*$",
    re.IGNORECASE | re.MULTILINE,
)


_THINKING = r"(?:think|thinking|thoughts?|reasoning|scratchpad)"
_THOUGHT = re.compile(rf"<{_THINKING}>.*?</{_THINKING}>|<!--.*?-->", re.IGNORECASE | re.DOTALL)
_THOUGHT_CLOSED = re.compile(rf"</{_THINKING}>", re.IGNORECASE)
"""A closing tag whose opening one is not in the text (it was in the prefill, or cut off): the
text before it is thinking too."""
_HTML = (
    "a|b|i|u|s|em|strong|small|big|span|font|center|sub|sup|mark|code|pre|img|br|p|div|li|ul"
    "|ol|tr|td|th|table|thead|tbody|hr|h[1-6]|blockquote|details|summary|section|article"
)
_TAG = re.compile(rf"</?({_HTML})(?:\s[^<>\n]*)?/?>", re.IGNORECASE)
"""An HTML tag (a known one: "<user>", "<sigh>" or "<CLOSED>" in prose are words)."""
_INLINE = frozenset(
    {"a", "b", "i", "u", "s", "em", "strong", "small", "big", "span", "font", "sub", "sup"}
    | {"mark", "code", "img"}
)
"""Tags inside a line; the others break it."""


def without_thoughts(text: str) -> str:
    """`text` without a model's thinking (the whole text when it is only that)."""
    if "<" not in text:
        return text
    plain = _THOUGHT.sub(" ", text)
    closed = _THOUGHT_CLOSED.search(plain)
    if closed:
        plain = plain[closed.end() :]
    return plain.strip() or text


def without_tags(text: str) -> str:
    """`text` without HTML tags, what they hold kept (a tag that breaks a line as a line
    break, one inside a line as nothing): a styled reply ("<div style=...>She draws her
    sword.</div>") recaps as its words. After `without_status`, which reads a tag as a
    tracker's mark."""
    if "<" not in text:
        return text
    plain = _TAG.sub(lambda m: "" if m.group(1).lower() in _INLINE else "\n", text)
    return plain.strip() or text


def story_text(text: str) -> str:
    """`text` without a model's thinking, the status blocks around it and HTML tags: what a
    recap is made of (a message that is only a status block keeps it)."""
    text = without_thoughts(text)
    return without_tags(without_status(text) or text)


@lru_cache(maxsize=4096)
def in_character(text: str) -> str:
    """`text` without its notes out of character (each left as a space), a model's thinking,
    its status blocks and HTML tags. Cached: recall reads the same old messages turn after
    turn."""
    text = story_text(text)
    if "(" not in text and "[" not in text and "ooc" not in text.lower() and "//" not in text:
        return text
    return _NOTE.sub(" ", text)


def recapped_text(text: str) -> str:
    """What a message's recap is made of: its text without notes out of character, or the
    whole text when it is only a note (every included message has a recap)."""
    said = in_character(text)
    return said if said.strip() else text
