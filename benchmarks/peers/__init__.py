"""Real peers replayed beside lightmem2 on the same sessions, each in its own virtual environment."""
