"""Provider adapters: map an SDK's stream onto a ``Step`` and the log back onto the next request.

One module per provider, each needing its SDK as an optional extra (``agentlog[openai]``,
``agentlog[anthropic]``, ``agentlog[agents]`` for the Agents SDK session); importing this
package, or the SDK-free request/item mappings, imports no SDK.
"""
