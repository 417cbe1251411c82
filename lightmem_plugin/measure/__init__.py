"""Offline measurement: replaying recorded sessions, retention of what the agent used, fidelity."""
