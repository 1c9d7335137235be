"""The agent: the tool-calling loop, its session context, the system prompt, and the one builder.

May import every other room of ``core``; no room imports it.
"""
