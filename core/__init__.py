"""The agent core: messages, events, models, the loop, the store. Knows no surface."""
