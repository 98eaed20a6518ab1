"""Work made of many jobs: groups, chains, chunked runs and the outbox."""
