"""The prompt prefix kept byte-stable: the stabilizer, short call ids, volatile-value placeholders."""
