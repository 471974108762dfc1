"""Hydra configs shipped as package data so a non-editable install finds them."""
