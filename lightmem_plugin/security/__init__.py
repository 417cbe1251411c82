"""Security: credential redaction and the team gateway's tenancy rules."""
