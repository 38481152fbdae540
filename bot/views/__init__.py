"""Views drawn: what a person sees in Slack, as Block Kit (cards, group cards, modals, the Home tab), and the
escaping no value can break out of. Pure: no I/O, time passed in."""
