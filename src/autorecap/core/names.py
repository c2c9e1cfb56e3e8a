"""Who speaks in a chat: the user's and the character's names, and the key profiles bind to."""

from __future__ import annotations

import re
from collections.abc import Sequence

from wordfreq import zipf_frequency

from autorecap.core.model import Chat, Message
from autorecap.core.out_of_character import story_text


def user_name_of(chat: Chat) -> str:
    """The user's name in a chat (from its messages, else the header)."""
    for message in reversed(chat.messages):
        if message.is_user and message.name:
            return message.name
    name = chat.user_name
    return name if name and name != "unused" else "User"


def character_name_of(chat: Chat) -> str:
    """The character's name in a chat (from its messages, else the header)."""
    for message in reversed(chat.messages):
        if (
            not message.is_user
            and not message.is_narrator
            and not message.is_hidden
            and message.name
        ):
            return message.name
    name = chat.character_name
    return name if name and name != "unused" else "Assistant"


def cast_of(chat: Chat) -> list[str]:
    """The characters who speak in a chat (not the user, the narrator or a nameless
    "Assistant"), in the order they first speak: more than one in a group chat."""
    seen: dict[str, None] = {}
    for message in chat.messages:
        name = message.name
        if name and not message.is_user and not message.is_narrator and name != "Assistant":
            seen.setdefault(name, None)
    return list(seen)


def character_key_of(chat: Chat) -> str | None:
    """The key profiles are bound to: the first character's avatar (group) or name."""
    for message in chat.messages:
        if not message.is_user and not message.is_narrator and message.name:
            return message.character_key
    name = chat.character_name
    return name if name and name != "unused" else None


# --- names from what an OpenAI-style request carries (the proxy sees no header) ------------------

_WORD = r"[A-ZÀ-ÖØ-Þ][\w'’-]*"
_NAME = (
    r"(?:(?:Dr|Mr|Mrs|Ms|Mx|St|Prof|Capt|Sgt|Lt|Col|Gen|Fr|Sir)\.? |(?:[A-Z]\.){1,3} ?)?"
    rf"{_WORD}(?:[ -]{_WORD}){{0,2}}"
)
"""A name: up to three capitalised words, after a title ("Dr. Faust") or initials ("J.R.
Hale"). A full stop ends it ("between Seraphina and Tomas. Write ..." names Tomas)."""
_NOT_NAMES = frozenset(
    {
        "User",
        "Assistant",
        "AI",
        "An AI",
        "Narrator",
        "System",
        "Human",
        "Model",
        "Character",
        "Bot",
        "Player",
        "You",
        "I",
        "The",
        "A",
        "An",
        "Char",
        "Your",
        "ChatGPT",
        "Claude",
        "GPT",
    }
)
_CHARACTER_PATTERNS = [
    re.compile(rf"\bWrite ({_NAME})['’]s? next (?:reply|response|message)"),
    re.compile(
        rf"\b(?:You are|You're|you are|you're) (?:now |playing |roleplaying as |portraying )?"
        rf"({_NAME})(?=[\s,.;:!)]|$)"
    ),
    re.compile(
        rf"\b(?:[Pp]lay|[Rr]oleplay as|[Pp]ortray|[Aa]ct as|the role of|in character as) "
        rf"({_NAME})(?=[\s,.;:!)]|$)"
    ),
    re.compile(rf"(?:^|[\[\n])\s*({_NAME})['’]s (?:personality|description|appearance|persona)\b"),
    re.compile(rf"(?:^|\n)\s*\[?(?:Character|Char|Name)\s*[:=]\s*({_NAME})\s*(?:[\]\n]|$)"),
]
_USER_PATTERNS = [
    re.compile(
        rf"\b(?:[Tt]he user|[Uu]ser|[Tt]he player)(?:['’]s name)? (?:is|plays|is called|is "
        rf"named|is playing) ({_NAME})(?=[\s,.;:!)]|$)"
    ),
    re.compile(rf"\b(?:talking|chatting|speaking|writing) (?:to|with) ({_NAME})(?=[\s,.;:!)]|$)"),
]
_BETWEEN = re.compile(
    rf"\b(?:chat|conversation|roleplay|role-play|story|dialogue|exchange|scene) between "
    rf"({_NAME}(?:, {_NAME})*),? and ({_NAME})(?=[\s,.;:!)]|$)"
)
"""SillyTavern's "a chat between Seraphina and Tomas"; in a group chat, "between Mae, Rook and
Tomas" (the characters, then the user)."""
_PREFIX = re.compile(rf"^({_NAME})\.?: (?=\S)")


def _name(found: str | None) -> str | None:
    if not found:
        return None
    name = found.strip(" .-'’")
    if not name or name in _NOT_NAMES or name.split()[0] in _NOT_NAMES or len(name) > 40:
        return None
    return name


def names_from_prompt(texts: Sequence[str]) -> tuple[str | None, str | None]:
    """(user, character) as a system prompt or character card names them: "Write Seraphina's
    next reply in a fictional chat between Seraphina and Tomas" (SillyTavern's main prompt),
    "You are Seraphina", "Seraphina's personality:", "The user is Tomas"; None where nothing
    says."""
    text = "\n".join(texts)
    character = next(
        (n for p in _CHARACTER_PATTERNS for m in p.finditer(text) if (n := _name(m.group(1)))),
        None,
    )
    user = next(
        (n for p in _USER_PATTERNS for m in p.finditer(text) if (n := _name(m.group(1)))), None
    )
    for match in _BETWEEN.finditer(text):
        if ", " in match.group(1):
            # A group chat ("between Mae, Rook and Tomas"): the user is the last one; no one
            # character speaks for the group (its messages name their speakers).
            return _name(match.group(2)), None
        first, second = _name(match.group(1)), _name(match.group(2))
        if character is None and first and second:  # SillyTavern writes {{char}} first
            character, user = first, user or second
        elif character in (first, second) and user is None:
            user = second if character == first else first
        if character and user:
            break
    if user == character:
        user = None
    return user, character


def speaker_prefix(content: str) -> str | None:
    """The name a frontend put before a message's text ("Seraphina: ..."), if any."""
    match = _PREFIX.match(content)
    return _name(match.group(1)) if match else None


STAND_INS = frozenset({"User", "Assistant", ""})
"""What the proxy calls a speaker that nothing names."""
WORD_ZIPF = 4.5
"""An English word this common before a colon ("Note: ...", "Update: ...") is no speaker."""
_NOT_SPEAKERS = frozenset({"OOC", "Edit", "PS", "P.S", "TL;DR", "TLDR", "NB", "Q", "A"})


def spoken(message: Message) -> tuple[str, str]:
    """Who speaks a message, and what they say. A frontend that puts the speaker's name before
    the text ("Mae: ...", SillyTavern's way in a group chat through an OpenAI-compatible API)
    names the speaker where the message's own name is a stand-in, and is not said twice where
    it repeats that name."""
    name, text = message.name, message.text
    match = _PREFIX.match(text)
    prefix = _name(match.group(1)) if match else None
    if match is None or prefix is None:
        return name, text
    said = text[match.end() :]
    if prefix == name:
        return name, said
    if name.strip() in STAND_INS and _could_be_speaker(prefix):
        return prefix, said
    return name, text


def said(message: Message) -> tuple[str, str]:
    """`spoken`, without a model's thinking, the status blocks a card prints around a reply
    and HTML tags: what a recap is made of (the whole text when it is only those)."""
    name, text = spoken(message)
    return name, story_text(text)


_TITLES = frozenset({"dr", "mr", "mrs", "ms", "miss", "sir", "lady", "lord", "captain", "capt"})


def _could_be_speaker(prefix: str) -> bool:
    """A name, not a heading ("Chapter Two:") or a word ("Note:"): its first word is no
    common English word, unless a title ("Dr. Faust")."""
    if prefix in _NOT_SPEAKERS or prefix.split()[0].endswith(("'s", "’s")):
        return False  # "Captain's Log:" is a heading
    first = prefix.split()[0].lower().rstrip(".")
    if first in _TITLES and " " in prefix:
        return True
    return zipf_frequency(first, "en") < WORD_ZIPF


def names_from_request(
    system: Sequence[str], history: Sequence[tuple[str, str, str]]
) -> tuple[str | None, str | None]:
    """(user, character) from a chat-completion request: the `name` fields of its messages
    ((role, content, name) each), else the system prompt and card (`names_from_prompt`), else
    a name every message of the role opens with ("Seraphina: ...")."""
    named: dict[str, str | None] = {"user": None, "assistant": None}
    for role, _content, name in history:
        if role in named and named[role] is None:
            named[role] = _name(name)
    prompt_user, prompt_character = names_from_prompt(system)
    user = named["user"] or prompt_user
    character = named["assistant"] or prompt_character
    for role in ("user", "assistant"):
        if (user if role == "user" else character) is not None:
            continue
        prefixes = [speaker_prefix(c) for r, c, _ in history if r == role]
        found = [p for p in prefixes if p]
        # One name opening most of the role's messages: the frontend's "names in content".
        if len(found) >= 2 and len(found) * 3 >= len(prefixes) * 2 and len(set(found)) == 1:
            if role == "user":
                user = found[0]
            else:
                character = found[0]
    return user, (character if character != user else None)


def learn_names(chat: Chat, user: str | None, character: str | None) -> bool:
    """Names learnt from outside the chat (a proxied request), for a speaker the chat knows
    only by its stand-in ("User", "Assistant"): written into the header and onto the messages
    that carry the stand-in. Returns whether anything changed."""
    changed = False
    for key, name, known, stand_in, is_user in (
        ("user_name", user, user_name_of(chat), "User", True),
        ("character_name", character, character_name_of(chat), "Assistant", False),
    ):
        if not name or known != stand_in:
            continue
        chat.header[key] = name
        chat.notify_change(None)
        changed = True
        for message in chat.messages:
            if message.is_user == is_user and message.name == stand_in:
                message["name"] = name
                chat.notify_change(message)
    return changed


def names_known(chat: Chat) -> bool:
    """Whether the chat names both speakers (not only by the stand-ins)."""
    return user_name_of(chat) != "User" and character_name_of(chat) != "Assistant"
