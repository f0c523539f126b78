"""The one exception type whose message is meant for a user (a person, not a log)."""


class UserError(Exception):
    """Bad input from a user: the message says what is wrong and what to do instead.

    Everything that parses outside input (issue text, commands, index pages, payloads) raises
    only this; the CLI prints it as one line and exits non-zero, the GitHub jobs post it.
    """
