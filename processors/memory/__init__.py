"""A memory's life: the write rules and the record it becomes, refusal of low-value
writes, twins, lifecycle changes, tiers, core blocks, retention and sessions."""
