"""Work on a copy of a chat, with no lock held, and bring its changes back.

A scene job that calls an LLM may take minutes. Holding the chat's lock for that long would make
the proxy's requests for the chat wait for the model: an LLM call on the reply path. So the job
copies the chat (under the lock, quickly), runs on the copy (no lock), and merges what the work
changed into the live chat (under the lock again): the extension data of each message it
changed, key by key, and the running recap storage. When the live chat changed the same thing
meanwhile (a message's text edited, the running recap edited), the merge refuses and the job is
retried on fresh data.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from autorecap.core import combined, running
from autorecap.core.data import read_namespace, set_data
from autorecap.core.model import Chat, Message
from autorecap.errors import AutorecapError
from autorecap.pacing import pause

VERSIONED = (running.STORAGE_KEY, combined.STORAGE_KEY)
"""The versioned recaps in the chat's metadata that a job may add to."""


class ChangedMeanwhileError(AutorecapError):
    """The live chat changed what the work on the copy changed: retry on fresh data."""


class Snapshot:
    """A copy of `chat` taken now (hold the chat's lock while constructing it)."""

    def __init__(self, chat: Chat) -> None:
        self.copy = Chat(header=copy.deepcopy(chat.header), chat_id=chat.id)
        self.copy.layout = chat.layout
        self._live = list(chat.messages)
        for number, message in enumerate(self._live):
            if number % 100 == 0:
                pause(step_aside=False)  # the copy is of one moment
            copied = self.copy.append(copy.deepcopy(dict(message)))
            copied._id = message._id
            copied._rev = message._rev
        self._before = [_namespace_json(m) for m in self.copy.messages]
        self._versioned_before = {key: _stored_json(self.copy, key) for key in VERSIONED}

    def merge(self, chat: Chat) -> tuple[list[Message], bool]:
        """Apply the copy's changes to the live `chat` (hold its lock). Returns the live
        messages changed and whether the header (running recap) changed."""
        present = {id(m) for m in chat.messages}
        afters = [_namespace_json(m) for m in self.copy.messages]
        touched = [i for i, after in enumerate(afters) if after != self._before[i]]
        # What the work wrote depends on the text up to the last message it wrote to (a scene
        # recap reads its whole scene): any of those edited meanwhile, and it is made again.
        for index in range(touched[-1] + 1 if touched else 0):
            live = self._live[index]
            if id(live) in present and live.text != self.copy.messages[index].text:
                raise ChangedMeanwhileError(
                    f"message {chat.messages.index(live)} was edited during the recap; "
                    "it is made again"
                )
        changed: list[Message] = []
        for index in touched:
            after = afters[index]
            live = self._live[index]
            if id(live) not in present:
                continue  # deleted meanwhile: nothing to apply it to
            old: dict[str, Any] = json.loads(self._before[index]) or {}
            new: dict[str, Any] = json.loads(after) or {}
            for key in sorted(set(old) | set(new)):
                if old.get(key) != new.get(key):
                    set_data(live, key, copy.deepcopy(new.get(key)))
            changed.append(live)
        header = False
        for key in VERSIONED:
            after = _stored_json(self.copy, key)
            if after == self._versioned_before[key]:
                continue
            if _stored_json(chat, key) != self._versioned_before[key]:
                raise ChangedMeanwhileError(
                    "the running recap changed during the recap; it is redone"
                    if key == running.STORAGE_KEY
                    else "the combined recap changed during the recap; it is redone"
                )
            chat.metadata[key] = copy.deepcopy(self.copy.metadata.get(key))
            chat.notify_change(None)
            header = True
        return changed, header


def _namespace_json(message: Message) -> str:
    return json.dumps(read_namespace(message), sort_keys=True, default=str)


def _stored_json(chat: Chat, key: str) -> str:
    """A versioned recap's storage in the chat's metadata, as JSON (to compare)."""
    return json.dumps(chat.metadata.get(key), sort_keys=True, default=str)
