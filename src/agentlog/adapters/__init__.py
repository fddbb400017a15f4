"""Provider adapters: map an SDK's stream onto a ``Step`` and the log back onto the next request.

One module per provider, each needing its SDK as an optional extra (``agentlog[openai]``,
``agentlog[anthropic]``); importing this package imports no SDK.
"""
