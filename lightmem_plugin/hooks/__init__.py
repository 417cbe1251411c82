"""The hook handlers of the hosts that run hooks (Claude Code, Codex): one module per host, each a
``handle(event, payload, run_line)`` that :mod:`lightmem_plugin.hosts.hook_runtime` calls within its
budget; ``python -m lightmem_plugin.hooks HOST EVENT`` is the entry the installed hooks run."""
