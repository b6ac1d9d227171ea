"""The Textual app and the command line: the only package that imports textual or rich."""
