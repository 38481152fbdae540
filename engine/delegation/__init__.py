"""Delegation of reviewer roles: who a delegation may be handed to (one rule for every surface), and the
delegations in force as every surface gives, ends and reads them."""
