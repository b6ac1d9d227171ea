"""The evidence each check rule looks for, one module per family of rules (rules.py holds the table)."""
