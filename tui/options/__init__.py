"""Option groups shared by a command and a screen: one table of flags, one `validate()`.

The CLI adds the flags to its argparse parser; a screen parses the same words from an input line
with `parse_words`. Both build the same dataclass and call its `validate()`, which raises
`OptionError` with one line: the CLI turns it into a CliError, the screen shows it inline.
"""
