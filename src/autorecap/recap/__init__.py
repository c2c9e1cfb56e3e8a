"""The recap work, one module per tier, behind one backend interface.

- `messages`: tier 1, a recap of each message;
- `detection`: tier 2, where scenes end;
- `scenes`: tier 3, a recap of each closed scene;
- `running_recap`: tier 4, the scenes folded into the versioned running recap;
- `pipeline`: the four in order;
- `backend`: the interface every backend implements (`RecapBackend`), with the offline engine
  (`offline/`) and any OpenAI-compatible LLM (`openai_compat`, its calls through
  `chat_client`); `backends.make_backend` picks one from the settings.

May import `autorecap.core`, `settings`, `errors` and `pacing`; never the session, the jobs,
the store, the server or the CLI (they call this package, not the other way round).
"""

from autorecap.recap.backend import LLMError, RecapBackend, RecapRequest, RecapResult
from autorecap.recap.backends import make_backend
from autorecap.recap.detection import detect_scene_breaks
from autorecap.recap.messages import (
    RecapStats,
    build_request,
    needs_recap,
    recap_all,
    recap_message,
    store_result,
)
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.recap.openai_compat import OpenAICompatBackend
from autorecap.recap.pipeline import PipelineStats, run_pipeline
from autorecap.recap.running_recap import enforce_cap, update_running_recap
from autorecap.recap.scenes import recap_scenes, scene_recap_due

__all__ = [
    "LLMError",
    "OfflineBackend",
    "OpenAICompatBackend",
    "PipelineStats",
    "RecapBackend",
    "RecapRequest",
    "RecapResult",
    "RecapStats",
    "build_request",
    "detect_scene_breaks",
    "enforce_cap",
    "make_backend",
    "needs_recap",
    "recap_all",
    "recap_message",
    "recap_scenes",
    "run_pipeline",
    "scene_recap_due",
    "store_result",
    "update_running_recap",
]
