"""The messaging gateway surface: Telegram chats with the agent, approvals as buttons, and cron jobs."""
