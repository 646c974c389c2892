"""The report's own error for unusable parameters (its own module: both the parameters and the kernel channel
name it)."""


class ParameterError(ValueError):
    """A notebook or report parameter is unusable; the message is one sentence saying which and why."""
