"""Customer messages: which emails an invoice's events call for and what they say (pure), the
update-card token, and the channel that sends them (`channel`, over SMTP)."""
