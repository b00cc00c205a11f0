"""Helpers that several test modules share and bench/ does not need (what both use is in the top-level
``harness`` package): the SASL_SSL cluster pair (sasl), the mirror's
flows and groups (mirror_flows) and its command line (mirror_cli), the fault oracle and rig, ... Not tests
themselves: pytest collects nothing here, and no test module imports another test module (tests/test_layout.py)."""
