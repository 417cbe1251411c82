"""What the hosts share: editing their files on install, and the hook side (reducing session, proxy control, transcripts)."""
