"""hitl's Slack adapter, read as a pipeline (as bolt-python's is): ``requests/`` (Slack's requests in, verified
and parsed once), ``listeners/`` (what each click, command and form does, through ``decisions``), ``views/`` (the
Block Kit drawn: cards, modals, the Home tab) and ``outbound/`` (calls out: the notifier's workers, thread replies,
Home tabs). ``app``, ``context``, ``settings``, ``metrics`` and ``errors`` are the floor they share. It composes
nothing itself: ``hitl serve`` wires it to the engine."""
