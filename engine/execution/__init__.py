"""What agents and workflow steps share to run an effect: tools and their schemas, effect claims, the run lease."""
