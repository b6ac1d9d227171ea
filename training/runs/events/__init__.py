"""The event protocol: what each event carries (types), the one incremental reader, the writer our workers use, and the failures that show only in events (checks)."""
