"""Jobs: the only place where the pure core and the adapters meet."""
