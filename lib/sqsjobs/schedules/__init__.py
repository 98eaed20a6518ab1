"""Periodic jobs with their period locks, and one-time schedules (long delays)."""
