"""The ``lightmem2`` subcommands, one module each; :mod:`.registry` lists them (and says how to add one)."""
