"""The run directory's records: meta.json, the ranks' exits and result.json as dataclasses (types), and RunRecord, which reads and writes them (record)."""
