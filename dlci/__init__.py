"""dlci: operator-level CI for deep-learning compilers, converters and libraries."""
__version__ = "0.1.0"
