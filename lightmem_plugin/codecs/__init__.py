"""What every wire codec shares: the decode/encode toolkit and the per-object memo.

Each provider API's codec lives with the rest of that API in :mod:`lightmem_plugin.wire` (for example
``wire/anthropic/codec.py``) and offers ``decode_request(payload) -> Request`` and
``encode_request(req) -> dict`` with ``encode_request(decode_request(p)) == p`` (JSON-equal) for every
payload it accepts; a payload it cannot read raises :class:`~lightmem_plugin.errors.PayloadError` and
nothing else. Here: :mod:`._common` (what the three codecs share, such as :class:`._common.Reuse`, a
session's last decoded call) and :mod:`.memo` (identity-keyed caches the pipeline, metering and the
prefix use). Why apart from ``wire/``: the prefix and metering layers use the memo and sit below the
wire APIs, which restore the prefix's placeholders.
"""
