"""hook claude-code|codex EVENT: the host's hook JSON on stdin, our hook JSON on stdout.

Events: SessionStart, UserPromptSubmit, PostToolUse. A hook never blocks its host on our failure: a
crash, a timeout or unreadable stdin exits 0 and prints nothing, so the host goes on with the original.
"""
