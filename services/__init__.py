"""Squall's services: thin processes around the pure core in :mod:`squall`."""
