"""`autorecap eval`: how much of a chat's past the memory keeps, per style of chat.

- `corpus`: the evaluation chats and their truth (scene starts, questions with answers);
- `measures`: breaks found, answer recall, planted facts, the latest-messages baseline;
- `run`: recap chats from scratch and measure them, pooled per style.

May import `autorecap.core`, `recap`, `stfiles`, `testing` and `settings`; nothing above.
"""

from autorecap.evaluation.corpus import (
    CorpusChat,
    CorpusError,
    Question,
    from_generated,
    load_corpora,
    proxy_view,
    shipped,
)
from autorecap.evaluation.measures import answer_recall, match_breaks, planted_found
from autorecap.evaluation.run import (
    BUDGETS,
    ChatResult,
    StyleRow,
    by_style,
    copy_chat,
    evaluate_chat,
    evaluate_chats,
    fresh_copy,
)

__all__ = [
    "BUDGETS",
    "ChatResult",
    "CorpusChat",
    "CorpusError",
    "Question",
    "StyleRow",
    "answer_recall",
    "by_style",
    "copy_chat",
    "evaluate_chat",
    "evaluate_chats",
    "fresh_copy",
    "from_generated",
    "load_corpora",
    "match_breaks",
    "planted_found",
    "proxy_view",
    "shipped",
]
