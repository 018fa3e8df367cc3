"""Bridges to other differential-privacy libraries (optional extras): :mod:`knorm.interop.opendp`."""
