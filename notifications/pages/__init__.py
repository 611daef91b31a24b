"""The notification channels page (staff: channels are shared by everyone's jobs)."""
