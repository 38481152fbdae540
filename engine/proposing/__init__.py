"""What the service's proposal path uses beside the admission guards: the policy's counted verdict on a proposed call,
and what a call that runs without a person records first (its audit entry and FYI) and skips (a plan per tool)."""
