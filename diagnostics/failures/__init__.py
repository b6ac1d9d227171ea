"""Failure catalogue, classifier, symptom guide and failure demos."""
