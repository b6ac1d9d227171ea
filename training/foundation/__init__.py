"""What every layer may import: the user's language and its catalogue, reading and writing mgtutor's own files safely, which variables are secret. Imports nothing of mgtutor's."""
