"""Test doubles for sagents-django (fake LLM servers and their fixtures)."""
