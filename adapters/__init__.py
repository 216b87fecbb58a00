"""Framework adapters (installed as ``compat.adapters``): each translates compat's normalised
calls into one framework's own collectives. Importing an adapter imports its framework."""
