"""The Python API of DESIGN section 9, for any agent loop (the adapters use it too)::

    from lightmem_plugin import LightMem
    lm = LightMem.from_config()                        # or LightMem(config=Config(...))
    s = lm.session("session-id")
    msgs = s.before_model_call(messages, tools=tools)  # OpenAI chat-form in and out
    out = s.ingest_tool_result(call_id, output)        # what the model will see of this output
    s.after_model_call(response, usage=usage)          # restores placeholders, records cache usage
    print(lm.command("/lightmem2 status"))

Why a subclass here and not a method in :mod:`lightmem_plugin.pipeline`: answering a chat command
needs the command table, and the commands use the pipeline; the pipeline must not depend on them.
"""

from __future__ import annotations

from .commands.table import run_line
from .pipeline import LightMem as _Pipeline
from .pipeline import Session

__all__ = ["LightMem", "Session"]


class LightMem(_Pipeline):
    """The plugin for one process (config, artifact registry, sessions) plus the chat commands."""

    def command(self, line: str) -> str:
        """The reply to a chat command such as ``/lightmem2 status``: the same text as the CLI.

        Like the CLI, the command reads the user's config and data dir (``LIGHTMEM2_HOME``), not this
        instance's settings; a bad command comes back as its one-line message, never as an exception.
        """
        return run_line(line)[0]
