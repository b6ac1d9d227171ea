"""Lesson content (data) with its loader and checks. Headless: never imports textual or rich."""
