"""A reference coding agent: a streaming loop over the OpenAI adapter with two read-only file tools.

``agentlog.agent.loop`` (needs ``agentlog[openai]``) is the loop ``examples/coding_agent.py`` and
``agentlog chat`` both run; ``agentlog.agent.tools`` holds the tools (no SDK import).
"""
