"""Helpers shared by the tests: paths, fresh processes, file writers, reference cases."""
