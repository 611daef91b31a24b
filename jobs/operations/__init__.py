"""Operator tools: backfill, every slot accounted for, retention, and their periodic tasks."""
