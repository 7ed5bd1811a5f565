"""Events in: a homeserver's transaction taken in, each event read as the words a person reads, stored, and a new
line offered to the claimers in their order (``lines``)."""
