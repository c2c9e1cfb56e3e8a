"""Prompt assembly against SillyTavern's own placement rules (SPEC-NOTES §1 and §3).

The reference below ports SillyTavern's functions structurally, from its source (v1.12/1.18):
- `getExtensionPrompt` (public/script.js),
- `populationInjectionPrompts` (public/scripts/openai.js): chat completion,
- `doChatInject` (public/script.js): text completion.
It is written without looking at `autorecap.core.prompt`: it reverses the chat, splices at
`depth + totalInserted`, and reverses back, exactly as SillyTavern does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from autorecap.core.model import Message
from autorecap.core.prompt import (
    MESSAGE_OVERHEAD,
    HistoryItem,
    assemble_chat,
    assemble_text,
    extension_prompt,
    history_from_chat,
)
from autorecap.core.slots import ExtensionPrompts
from autorecap.core.tokens import TokenCounter

# --- SillyTavern's constants ---------------------------------------------------------------------

NONE, IN_PROMPT, IN_CHAT, BEFORE_PROMPT = -1, 0, 1, 2  # extension_prompt_types
SYSTEM, USER, ASSISTANT = 0, 1, 2  # extension_prompt_roles
ROLE_TYPES = {"system": SYSTEM, "user": USER, "assistant": ASSISTANT}  # openai.js roleTypes
ROLE_NAMES = {SYSTEM: "system", USER: "user", ASSISTANT: "assistant"}

# JavaScript's String.prototype.trim: WhiteSpace and LineTerminator code points.
JS_WHITESPACE = "".join(
    [
        "\t\n\v\f\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff",
        *(chr(c) for c in range(0x2000, 0x200B)),
    ]
)


def js_trim(text: str) -> str:
    return text.strip(JS_WHITESPACE)


def js_trim_start(text: str) -> str:
    return text.lstrip(JS_WHITESPACE)


# --- the reference: SillyTavern ported -----------------------------------------------------------


@dataclass(frozen=True)
class StPrompt:
    """One entry of SillyTavern's `extension_prompts` object."""

    value: str
    position: int
    depth: int
    role: int


StPrompts = dict[str, StPrompt]


def st_get_extension_prompt(
    prompts: StPrompts,
    position: int,
    depth: int | None = None,
    separator: str = "\n",
    role: int | None = None,
    wrap: bool = True,
) -> str:
    """`getExtensionPrompt(position, depth, separator, role, wrap)`."""
    # Object.keys(extension_prompts).sort(): keys here are BMP text, so code points and UTF-16
    # code units order them the same way.
    entries = [prompts[key] for key in sorted(prompts)]
    entries = [x for x in entries if x.position == position and x.value]
    entries = [x for x in entries if depth is None or x.depth == depth]
    entries = [x for x in entries if role is None or x.role == role]
    joined = separator.join(js_trim(x.value) for x in entries)
    if wrap and joined:
        joined = f"{separator}{joined}{separator}"
    return joined


def st_max_depth(prompts: StPrompts) -> int:
    return max((p.depth for p in prompts.values() if p.position == IN_CHAT), default=0)


def st_population_injection_prompts(
    prompts: StPrompts, messages: list[dict[str, str]]
) -> list[dict[str, str]]:
    """`populationInjectionPrompts(prompts, messages)`: `messages` arrive newest first."""
    total_inserted_messages = 0
    for i in range(st_max_depth(prompts) + 1):
        role_messages = []
        separator = "\n"
        wrap = False
        for role in ("system", "user", "assistant"):
            role_prompts = ""  # no prompt-manager prompts here, only extension prompts
            extension = st_get_extension_prompt(
                prompts, IN_CHAT, i, separator, ROLE_TYPES[role], wrap
            )
            joint = separator.join(js_trim(x) for x in (role_prompts, extension) if x)
            if joint:
                role_messages.append({"role": role, "content": joint})
        if role_messages:
            inject_idx = i + total_inserted_messages
            messages[inject_idx:inject_idx] = role_messages  # messages.splice(idx, 0, ...)
            total_inserted_messages += len(role_messages)
    messages.reverse()
    return messages


def st_do_chat_inject(
    prompts: StPrompts, messages: list[dict[str, Any]], name1: str, name2: str
) -> None:
    """`doChatInject(messages, isContinue=false)`: `messages` in chat order, changed in place."""
    total_inserted_messages = 0
    messages.reverse()
    for i in range(st_max_depth(prompts) + 1):
        names = {SYSTEM: "", USER: name1, ASSISTANT: name2}
        role_messages = []
        for role in (SYSTEM, USER, ASSISTANT):
            extension = js_trim_start(
                st_get_extension_prompt(prompts, IN_CHAT, i, "\n", role, False)
            )
            if extension:
                role_messages.append(
                    {
                        "name": names[role],
                        "is_user": role == USER,
                        "mes": extension,
                        "narrator": role == SYSTEM,
                    }
                )
        if role_messages:
            inject_idx = i + total_inserted_messages
            messages[inject_idx:inject_idx] = role_messages
            total_inserted_messages += len(role_messages)
    messages.reverse()


def reference_chat(
    main_prompt: str, history: list[HistoryItem], prompts: StPrompts
) -> list[dict[str, str]]:
    """What SillyTavern's chat completion sends (SPEC-NOTES §3 for the two standalone
    positions: each non-empty slot its own message, with its role)."""

    def standalone(position: int) -> list[dict[str, str]]:
        return [
            {"role": ROLE_NAMES[p.role], "content": js_trim(p.value)}
            for _, p in sorted(prompts.items())
            if p.position == position and js_trim(p.value)
        ]

    main = [{"role": "system", "content": main_prompt}] if main_prompt else []
    chat = [{"role": h.role, "content": h.content} for h in history if not h.hidden]
    chat.reverse()  # setOpenAIMessages hands them over newest first
    body = st_population_injection_prompts(prompts, chat)
    return [*standalone(BEFORE_PROMPT), *main, *standalone(IN_PROMPT), *body]


def reference_text(
    story_string: str,
    history: list[HistoryItem],
    prompts: StPrompts,
    user_name: str,
    char_name: str,
) -> str:
    """What SillyTavern's text completion sends: BEFORE_PROMPT, story string, IN_PROMPT, the
    chat lines with doChatInject's lines spliced in, then `CharName:`."""
    before = js_trim_start(st_get_extension_prompt(prompts, BEFORE_PROMPT))
    after = st_get_extension_prompt(prompts, IN_PROMPT)
    story = story_string if story_string.endswith("\n") else story_string + "\n"
    chat: list[dict[str, Any]] = [
        {
            "name": h.name or (user_name if h.role == "user" else char_name),
            "is_user": h.role == "user",
            "mes": h.content,
            "narrator": h.role == "system",
        }
        for h in history
        if not h.hidden
    ]
    st_do_chat_inject(prompts, chat, user_name, char_name)
    lines = "".join(
        f"{m['mes']}\n" if m["narrator"] else f"{m['name']}: {m['mes']}\n" for m in chat
    )
    return f"{before}{story}{after}{lines}{char_name}:"


# --- property: autorecap == the reference --------------------------------------------------------

KEYS = [
    "auto_recap_memory_scene",
    "auto_recap_memory_short",
    "1_memory",
    "2_floating_prompt",
    "Zeta",
    "alpha",
    "a-b",
    "a_b",
    "ab",
    "_x",
]
PADDING = st.text(alphabet=" \t\n\r\u00a0\u3000", max_size=3)
TEXTS = st.builds(
    lambda a, core, b: a + core + b,
    PADDING,
    st.text(alphabet="abcXYZ .-\n", min_size=1, max_size=10),
    PADDING,
)
BLANKS = st.text(alphabet=" \t\n\u3000", min_size=1, max_size=3)
# Mostly text; empty and blank values often enough to meet text at one depth and role.
VALUES = st.sampled_from(["empty", "blank", "text", "text", "text"]).flatmap(
    lambda kind: {"empty": st.just(""), "blank": BLANKS, "text": TEXTS}[kind]
)
HISTORY = st.lists(
    st.builds(
        HistoryItem,
        role=st.sampled_from(["user", "assistant", "system"]),
        content=st.text(alphabet="mnop .?!", max_size=8),
        name=st.sampled_from(["", "Juno", "Bram"]),
        hidden=st.booleans(),
    ),
    max_size=8,
).map(
    lambda items: [
        HistoryItem(h.role, h.content, h.name, h.hidden, index=i) for i, h in enumerate(items)
    ]
)


SlotSet = tuple[str, str, int, int, int]
"""One `setExtensionPrompt(key, value, position, depth, scan=false, role)` call."""
Scenario = tuple[list[HistoryItem], list[SlotSet]]


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    """A history (roles, names, hidden flags) and a sequence of slot sets over it: keys that
    sort differently from how they are set, every position and role, depths from 0 to past the
    history (one or two of them more often, so that several slots share a depth)."""
    history = draw(HISTORY)
    shared_depths = draw(st.lists(st.integers(0, len(history) + 3), min_size=1, max_size=2))
    depths = st.one_of(st.sampled_from(shared_depths), st.integers(0, len(history) + 3))
    sets = draw(
        st.lists(
            st.tuples(
                st.sampled_from(KEYS),
                VALUES,
                st.sampled_from([NONE, IN_PROMPT, BEFORE_PROMPT, IN_CHAT, IN_CHAT, IN_CHAT]),
                depths,
                st.sampled_from([SYSTEM, USER, ASSISTANT]),
            ),
            min_size=3,
            max_size=12,
        )
    )
    return history, sets


def build(sets: list[SlotSet]) -> tuple[ExtensionPrompts, StPrompts]:
    """The same setExtensionPrompt calls, in the same order, on both sides."""
    slots = ExtensionPrompts()
    prompts: StPrompts = {}
    for key, value, position, depth, role in sets:
        slots.set(key, value, position, depth, False, role)
        prompts[key] = StPrompt(value, position, depth, role)  # a key set again is replaced
    return slots, prompts


def check_bookkeeping(result: Any, history: list[HistoryItem], prompts: StPrompts) -> None:
    """Which keys were placed, which messages are in, hidden or dropped (none without a budget)."""
    assert set(result.injected) == {
        k for k, p in prompts.items() if p.position != NONE and js_trim(p.value)
    }
    assert result.included == [h.index for h in history if not h.hidden]
    assert result.hidden == [h.index for h in history if h.hidden]
    assert result.dropped == []


# Found by this test: a blank value that sorts after a text at the same depth and role leaves a
# trailing "\n" in the chat-completion message; SillyTavern trims the joint prompt.
BLANK_AFTER_TEXT: Scenario = (
    [],
    [("a", "Text.", IN_CHAT, 0, SYSTEM), ("b", " ", IN_CHAT, 0, SYSTEM)],
)


@settings(max_examples=200, deadline=None)
@example(BLANK_AFTER_TEXT, "")
@given(scenarios(), st.sampled_from(["", "Main prompt."]))
def test_chat_assembly_matches_sillytavern_reference(scenario: Scenario, main_prompt: str) -> None:
    history, sets = scenario
    slots, prompts = build(sets)
    result = assemble_chat(main_prompt, history, slots, TokenCounter("bytes"), context_size=None)
    assert result.messages == reference_chat(main_prompt, history, prompts)
    check_bookkeeping(result, history, prompts)


@settings(max_examples=200, deadline=None)
@example(BLANK_AFTER_TEXT, "Story.")
@given(scenarios(), st.sampled_from(["Story.", "Story.\n", "Line one\nline two"]))
def test_text_assembly_matches_sillytavern_reference(scenario: Scenario, story_string: str) -> None:
    history, sets = scenario
    slots, prompts = build(sets)
    result = assemble_text(
        story_string,
        history,
        slots,
        TokenCounter("bytes"),
        user_name="Ada",
        char_name="Vell",
        context_size=None,
    )
    assert result.text == reference_text(story_string, history, prompts, "Ada", "Vell")
    check_bookkeeping(result, history, prompts)


@settings(max_examples=100, deadline=None)
@given(scenarios())
def test_extension_prompt_matches_get_extension_prompt(scenario: Scenario) -> None:
    history, sets = scenario
    slots, prompts = build(sets)
    for position in (NONE, IN_PROMPT, IN_CHAT, BEFORE_PROMPT):
        assert extension_prompt(slots, position) == st_get_extension_prompt(prompts, position)
        for depth in range(len(history) + 4):
            for role in (SYSTEM, USER, ASSISTANT):
                assert extension_prompt(
                    slots, position, depth, role, wrap=False
                ) == st_get_extension_prompt(prompts, position, depth, "\n", role, False)


# --- golden tests: one per placement rule, both output forms -------------------------------------

MAIN = "MAIN"
STORY = "STORY"
H = [
    HistoryItem("user", "Hello.", index=0),
    HistoryItem("assistant", "Hi there.", index=1),
    HistoryItem("user", "How are you?", index=2),
]
M_MAIN = {"role": "system", "content": "MAIN"}
M0 = {"role": "user", "content": "Hello."}
M1 = {"role": "assistant", "content": "Hi there."}
M2 = {"role": "user", "content": "How are you?"}
L0, L1, L2 = "Ada: Hello.\n", "Vell: Hi there.\n", "Ada: How are you?\n"


def assemble_both(
    slots: ExtensionPrompts, history: list[HistoryItem] = H
) -> tuple[list[dict[str, str]], str]:
    counter = TokenCounter("bytes")
    chat = assemble_chat(MAIN, history, slots, counter)
    text = assemble_text(STORY, history, slots, counter, user_name="Ada", char_name="Vell")
    return chat.messages, text.text


def slots_of(*sets: SlotSet) -> ExtensionPrompts:
    slots = ExtensionPrompts()
    for key, value, position, depth, role in sets:
        slots.set(key, value, position, depth, False, role)
    return slots


def test_golden_before_prompt() -> None:
    # Chat: SPEC-NOTES §3, each slot its own message with its role, before the main prompt.
    # Text: script.js Generate, getExtensionPrompt(BEFORE_PROMPT).trimStart() before the story.
    slots = slots_of(
        ("b", "Second.", BEFORE_PROMPT, 0, USER), ("a", "First.", BEFORE_PROMPT, 0, SYSTEM)
    )
    messages, text = assemble_both(slots)
    assert messages == [
        {"role": "system", "content": "First."},
        {"role": "user", "content": "Second."},
        M_MAIN,
        M0,
        M1,
        M2,
    ]
    assert text == "First.\nSecond.\nSTORY\n" + L0 + L1 + L2 + "Vell:"


def test_golden_in_prompt() -> None:
    # Chat: SPEC-NOTES §3, its own message right after the main prompt block.
    # Text: script.js Generate, getExtensionPrompt(IN_PROMPT) (wrapped in \n) after the story.
    slots = slots_of(("k", "After.", IN_PROMPT, 0, ASSISTANT))
    messages, text = assemble_both(slots)
    assert messages == [M_MAIN, {"role": "assistant", "content": "After."}, M0, M1, M2]
    assert text == "STORY\n\nAfter.\n" + L0 + L1 + L2 + "Vell:"


def test_golden_in_chat_depth_zero_goes_after_the_last_message() -> None:
    # populationInjectionPrompts / doChatInject: splice at 0 of the reversed chat.
    slots = slots_of(("k", "Now.", IN_CHAT, 0, SYSTEM))
    messages, text = assemble_both(slots)
    assert messages == [M_MAIN, M0, M1, M2, {"role": "system", "content": "Now."}]
    assert text == "STORY\n" + L0 + L1 + L2 + "Now.\n" + "Vell:"


def test_golden_in_chat_depth_n_goes_before_the_last_n_messages() -> None:
    # populationInjectionPrompts / doChatInject: splice at N of the reversed chat.
    slots = slots_of(("k", "Two back.", IN_CHAT, 2, USER))
    messages, text = assemble_both(slots)
    assert messages == [M_MAIN, M0, {"role": "user", "content": "Two back."}, M1, M2]
    assert text == "STORY\n" + L0 + "Ada: Two back.\n" + L1 + L2 + "Vell:"


def test_golden_keys_at_one_depth_and_role_join_in_key_order() -> None:
    # getExtensionPrompt: Object.keys(extension_prompts).sort(), values joined with '\n'.
    # Code-point order: "A_key" < "a_key" < "b_key" (set here in another order).
    slots = slots_of(
        ("b_key", "third", IN_CHAT, 1, SYSTEM),
        ("a_key", "second", IN_CHAT, 1, SYSTEM),
        ("A_key", "first", IN_CHAT, 1, SYSTEM),
    )
    messages, text = assemble_both(slots)
    assert messages == [M_MAIN, M0, M1, {"role": "system", "content": "first\nsecond\nthird"}, M2]
    assert text == "STORY\n" + L0 + L1 + "first\nsecond\nthird\n" + L2 + "Vell:"


def test_golden_roles_at_one_depth_come_assistant_user_system() -> None:
    # populationInjectionPrompts / doChatInject push system, user, assistant into the reversed
    # chat; reversed back, chat order is assistant, user, system.
    slots = slots_of(
        ("s", "As system.", IN_CHAT, 1, SYSTEM),
        ("u", "As user.", IN_CHAT, 1, USER),
        ("a", "As assistant.", IN_CHAT, 1, ASSISTANT),
    )
    messages, text = assemble_both(slots)
    assert messages == [
        M_MAIN,
        M0,
        M1,
        {"role": "assistant", "content": "As assistant."},
        {"role": "user", "content": "As user."},
        {"role": "system", "content": "As system."},
        M2,
    ]
    assert text == (
        "STORY\n" + L0 + L1 + "Vell: As assistant.\nAda: As user.\nAs system.\n" + L2 + "Vell:"
    )


def test_golden_deeper_than_the_history_goes_to_the_top_deeper_higher() -> None:
    # populationInjectionPrompts / doChatInject: splice past the end of the reversed chat
    # appends; the deeper depth is spliced later, so after reversing it is higher.
    slots = slots_of(
        ("deep", "Depth 9.", IN_CHAT, 9, SYSTEM), ("less", "Depth 5.", IN_CHAT, 5, USER)
    )
    messages, text = assemble_both(slots)
    assert messages == [
        M_MAIN,
        {"role": "system", "content": "Depth 9."},
        {"role": "user", "content": "Depth 5."},
        M0,
        M1,
        M2,
    ]
    assert text == "STORY\nDepth 9.\nAda: Depth 5.\n" + L0 + L1 + L2 + "Vell:"


def test_golden_hidden_messages_are_skipped_and_not_counted_for_depth() -> None:
    # Generate/setOpenAIMessages drop is_system messages before doChatInject /
    # populationInjectionPrompts count depth, so depth 2 lands before "Hi there.", not after it.
    history = [
        HistoryItem("user", "Hello.", index=0),
        HistoryItem("assistant", "Hi there.", index=1),
        HistoryItem("assistant", "Secret.", hidden=True, index=2),
        HistoryItem("user", "How are you?", index=3),
    ]
    slots = slots_of(("k", "Inject.", IN_CHAT, 2, SYSTEM))
    messages, text = assemble_both(slots, history)
    assert messages == [M_MAIN, M0, {"role": "system", "content": "Inject."}, M1, M2]
    assert text == "STORY\n" + L0 + "Inject.\n" + L1 + L2 + "Vell:"
    result = assemble_chat(MAIN, history, slots, TokenCounter("bytes"))
    assert result.hidden == [2]
    assert result.included == [0, 1, 3]


def test_golden_empty_values_are_skipped() -> None:
    # getExtensionPrompt filters `x.value` (empty) and joins trimmed values; a blank value
    # trims to nothing, and populationInjectionPrompts / doChatInject push nothing for it.
    slots = slots_of(
        ("a", "", BEFORE_PROMPT, 0, SYSTEM),
        ("b", "", IN_PROMPT, 0, SYSTEM),
        ("c", "", IN_CHAT, 0, SYSTEM),
        ("d", "  \n ", IN_CHAT, 1, USER),
        ("e", " ", BEFORE_PROMPT, 0, USER),
    )
    messages, text = assemble_both(slots)
    assert messages == [M_MAIN, M0, M1, M2]
    assert text == "STORY\n" + L0 + L1 + L2 + "Vell:"
    assert assemble_chat(MAIN, H, slots, TokenCounter("bytes")).injected == []


def test_golden_values_are_trimmed() -> None:
    # getExtensionPrompt: `.map(x => x.value.trim())`.
    slots = slots_of(
        ("a", "\n  Before. \t", BEFORE_PROMPT, 0, SYSTEM),
        ("b", " After.\n\n", IN_PROMPT, 0, SYSTEM),
        ("c", "\u3000 Deep.  ", IN_CHAT, 1, ASSISTANT),
    )
    messages, text = assemble_both(slots)
    assert messages == [
        {"role": "system", "content": "Before."},
        M_MAIN,
        {"role": "system", "content": "After."},
        M0,
        M1,
        {"role": "assistant", "content": "Deep."},
        M2,
    ]
    assert text == "Before.\nSTORY\n\nAfter.\n" + L0 + L1 + "Vell: Deep.\n" + L2 + "Vell:"


def test_golden_in_chat_blank_value_after_a_text_is_trimmed_chat() -> None:
    # populationInjectionPrompts: getExtensionPrompt joins ["Text.", ""] to "Text.\n", and the
    # jointPrompt is `.map(x => x.trim())`: the message is "Text.".
    slots = slots_of(("a", "Text.", IN_CHAT, 0, SYSTEM), ("b", "   ", IN_CHAT, 0, SYSTEM))
    messages, _ = assemble_both(slots)
    assert messages == [M_MAIN, M0, M1, M2, {"role": "system", "content": "Text."}]


def test_golden_in_chat_blank_value_after_a_text_only_trim_start_text() -> None:
    # doChatInject: `String(getExtensionPrompt(...)).trimStart()` keeps "Text.\n" (no trimEnd),
    # and the line adds its own "\n".
    slots = slots_of(("a", "Text.", IN_CHAT, 0, SYSTEM), ("b", "   ", IN_CHAT, 0, SYSTEM))
    _, text = assemble_both(slots)
    assert text == "STORY\n" + L0 + L1 + L2 + "Text.\n\n" + "Vell:"


def test_golden_position_none_is_never_placed() -> None:
    # getExtensionPrompt is only ever asked for IN_PROMPT, IN_CHAT and BEFORE_PROMPT.
    slots = slots_of(("k", "Nowhere.", NONE, 0, SYSTEM), ("j", "Nowhere.", NONE, 1, USER))
    messages, text = assemble_both(slots)
    assert messages == [M_MAIN, M0, M1, M2]
    assert text == "STORY\n" + L0 + L1 + L2 + "Vell:"
    assert assemble_chat(MAIN, H, slots, TokenCounter("bytes")).injected == []


def test_main_prompt_as_a_message_list_is_the_leading_block() -> None:
    slots = slots_of(
        ("a", "Before.", BEFORE_PROMPT, 0, SYSTEM), ("b", "After.", IN_PROMPT, 0, USER)
    )
    main = [{"role": "system", "content": "One."}, {"role": "system", "content": "Two."}]
    result = assemble_chat(main, H, slots, TokenCounter("bytes"))
    assert result.messages == [
        {"role": "system", "content": "Before."},
        *main,
        {"role": "user", "content": "After."},
        M0,
        M1,
        M2,
    ]


# --- token budget ---------------------------------------------------------------------------------


class CharCounter(TokenCounter):
    """One token per character: budgets that can be worked out by hand."""

    def __init__(self) -> None:
        super().__init__("bytes")

    def count(self, text: Any) -> int:
        return len(text) if isinstance(text, str) else 0


OVH = MESSAGE_OVERHEAD  # what a chat message costs beyond its content

BUDGET_HISTORY = [
    HistoryItem("user", "a" * 30, index=0),
    HistoryItem("assistant", "b" * 2, index=1),  # small and old: fits, but must not be squeezed in
    HistoryItem("user", "c" * 40, index=2),  # the first that does not fit
    HistoryItem("assistant", "h" * 5, hidden=True, index=3),
    HistoryItem("user", "d" * 10, index=4),
    HistoryItem("assistant", "e" * 10, index=5),
]
D = {"role": "user", "content": "d" * 10}
E = {"role": "assistant", "content": "e" * 10}
BEFORE = {"role": "system", "content": "X" * 7}
SYS = {"role": "system", "content": "SYS"}
FIXED = (7 + OVH) + (3 + OVH)  # the BEFORE_PROMPT message and the main prompt
NEWEST_TWO = 2 * (10 + OVH)


def budget_slots(*extra: SlotSet) -> ExtensionPrompts:
    return slots_of(("before", "X" * 7, BEFORE_PROMPT, 0, SYSTEM), *extra)


def test_budget_drops_oldest_first_and_stops_at_first_misfit_chat() -> None:
    slack = 20  # < 40 + OVH (message 2), >= 2 + OVH (message 1)
    result = assemble_chat(
        "SYS",
        BUDGET_HISTORY,
        budget_slots(),
        CharCounter(),
        context_size=FIXED + NEWEST_TWO + slack,
    )
    assert result.messages == [BEFORE, SYS, D, E]
    assert result.included == [4, 5]
    assert result.dropped == [0, 1, 2]
    assert result.hidden == [3]
    assert result.injected == ["before"]
    assert result.injected_tokens == 7 + OVH
    assert result.history_tokens == NEWEST_TWO
    assert result.tokens == FIXED + NEWEST_TWO


def test_budget_fits_exactly_and_one_token_less_drops_one_more_chat() -> None:
    slots = budget_slots()
    exact = assemble_chat(
        "SYS", BUDGET_HISTORY, slots, CharCounter(), context_size=FIXED + NEWEST_TWO
    )
    assert exact.included == [4, 5]
    short = assemble_chat(
        "SYS", BUDGET_HISTORY, slots, CharCounter(), context_size=FIXED + NEWEST_TWO - 1
    )
    assert short.messages == [BEFORE, SYS, E]
    assert short.included == [5]
    assert short.dropped == [0, 1, 2, 4]
    assert short.hidden == [3]


def test_budget_reserve_reduces_the_budget_chat() -> None:
    context = FIXED + NEWEST_TWO + 20
    result = assemble_chat(
        "SYS", BUDGET_HISTORY, budget_slots(), CharCounter(), context_size=context, reserve=21
    )
    assert result.messages == [BEFORE, SYS, E]
    assert result.included == [5]
    assert result.dropped == [0, 1, 2, 4]


def test_budget_injected_text_is_kept_even_without_room_chat() -> None:
    slots = budget_slots(("deep", "deep", IN_CHAT, 3, SYSTEM))
    result = assemble_chat("SYS", BUDGET_HISTORY, slots, CharCounter(), context_size=1)
    assert result.messages == [BEFORE, SYS, {"role": "system", "content": "deep"}]
    assert result.included == []
    assert result.dropped == [0, 1, 2, 4, 5]
    assert result.hidden == [3]


def test_budget_injection_in_the_dropped_part_goes_to_the_top_chat() -> None:
    # Depth 3 counts messages 5, 4, 2: in the full history it goes between 1 and 2.
    slots = budget_slots(("deep", "deep", IN_CHAT, 3, SYSTEM))
    full = assemble_chat("SYS", BUDGET_HISTORY, slots, CharCounter())
    assert [m["content"] for m in full.messages][3:5] == ["b" * 2, "deep"]
    context = FIXED + (4 + OVH) + NEWEST_TWO + 20
    result = assemble_chat("SYS", BUDGET_HISTORY, slots, CharCounter(), context_size=context)
    assert result.messages == [BEFORE, SYS, {"role": "system", "content": "deep"}, D, E]
    assert result.dropped == [0, 1, 2]
    assert result.injected_tokens == (7 + OVH) + (4 + OVH)


# Text: lines are "U: text\n" / "C: text\n" (len + 4); head "XXXXXXX\n" + "STORY\n" (14); "C:" (2).
T_FIXED = 8 + 6 + 2
T_NEWEST_TWO = 2 * (10 + 4)
T_KEPT = "XXXXXXX\nSTORY\nU: dddddddddd\nC: eeeeeeeeee\nC:"


def assemble_budget_text(slots: ExtensionPrompts, context_size: int, reserve: int = 0) -> Any:
    return assemble_text(
        "STORY",
        BUDGET_HISTORY,
        slots,
        CharCounter(),
        user_name="U",
        char_name="C",
        context_size=context_size,
        reserve=reserve,
    )


def test_budget_drops_oldest_first_and_stops_at_first_misfit_text() -> None:
    result = assemble_budget_text(budget_slots(), T_FIXED + T_NEWEST_TWO + 20)
    assert result.text == T_KEPT
    assert result.included == [4, 5]
    assert result.dropped == [0, 1, 2]
    assert result.hidden == [3]
    exact = assemble_budget_text(budget_slots(), T_FIXED + T_NEWEST_TWO)
    assert exact.text == T_KEPT
    short = assemble_budget_text(budget_slots(), T_FIXED + T_NEWEST_TWO - 1)
    assert short.text == "XXXXXXX\nSTORY\nC: eeeeeeeeee\nC:"
    assert short.dropped == [0, 1, 2, 4]


def test_budget_reserve_reduces_the_budget_text() -> None:
    result = assemble_budget_text(budget_slots(), T_FIXED + T_NEWEST_TWO + 20, reserve=21)
    assert result.text == "XXXXXXX\nSTORY\nC: eeeeeeeeee\nC:"
    assert result.included == [5]
    assert result.dropped == [0, 1, 2, 4]


def test_budget_injection_in_the_dropped_part_goes_to_the_top_text() -> None:
    slots = budget_slots(("deep", "deep", IN_CHAT, 3, SYSTEM))
    result = assemble_budget_text(slots, T_FIXED + len("deep\n") + T_NEWEST_TWO + 20)
    assert result.text == "XXXXXXX\nSTORY\ndeep\nU: dddddddddd\nC: eeeeeeeeee\nC:"
    assert result.included == [4, 5]
    assert result.dropped == [0, 1, 2]
    none = assemble_budget_text(slots, 1)
    assert none.text == "XXXXXXX\nSTORY\ndeep\nC:"
    assert none.dropped == [0, 1, 2, 4, 5]


# --- history_from_chat ----------------------------------------------------------------------------

CHAT = [
    Message({"name": "Ada", "is_user": True, "mes": "Hi all."}),
    Message({"name": "Narrator", "is_user": False, "mes": "Wind.", "extra": {"type": "narrator"}}),
    Message({"name": "Juno", "is_user": False, "mes": "Hello.", "is_system": True}),
    Message({"name": "Bram", "is_user": False, "mes": 42, "extra": None}),
    Message({"is_user": False, "mes": "Nameless."}),
    Message({"name": "Ada", "is_user": True, "mes": "Hidden note.", "is_system": True}),
]


def test_history_from_chat_roles() -> None:
    assert history_from_chat(CHAT) == [
        HistoryItem("user", "Hi all.", "Ada", False, index=0),
        HistoryItem("system", "Wind.", "Narrator", False, index=1),
        HistoryItem("assistant", "Hello.", "Juno", True, index=2),
        HistoryItem("assistant", "42", "Bram", False, index=3),
        HistoryItem("assistant", "Nameless.", "", False, index=4),
        HistoryItem("user", "Hidden note.", "Ada", True, index=5),
    ]


def test_history_from_chat_group_prefixes_characters_only() -> None:
    items = history_from_chat(CHAT, group=True)
    assert [item.content for item in items] == [
        "Hi all.",
        "Wind.",
        "Juno: Hello.",
        "Bram: 42",
        "Nameless.",
        "Hidden note.",
    ]
    assert [item.role for item in items] == [
        "user",
        "system",
        "assistant",
        "assistant",
        "assistant",
        "user",
    ]
