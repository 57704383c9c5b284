"""Tests of the verification tools (a package, so that its conftest does not
shadow the conftest module of the top-level tests/ directory)."""
