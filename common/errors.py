"""The error type for bad user input, shared by run management and device placement."""


class ConfigError(Exception):
    """Bad input from the user (flags, run folder, checkpoint): reported as one line, exit status 2. Not a
    ValueError, so tyro reports it as is instead of wrapping it in a usage box."""


class DoesNotFit(ConfigError):
    """A run too large for the memory of the machine it would train on, found before it trains anything."""
