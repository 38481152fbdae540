"""Oversight as every gate reads it: the stop switch's halt orders, and the fresh reads that carry a change made in
any process on the store to every replica within a second."""
