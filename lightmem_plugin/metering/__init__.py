"""Metering: what each call cost and would have cost, from tokens to the ledger row."""
