"""stockroom: inventory and web-shop service."""

__version__ = "0.7.2"
