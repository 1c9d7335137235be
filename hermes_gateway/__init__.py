"""The messaging gateway surface (Telegram, cron): not yet available; ``hermes-gateway`` says so and exits."""
