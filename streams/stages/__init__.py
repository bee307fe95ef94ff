"""The stream stages: what consumes a topic and produces records and announcements, and the
timers that finish stream work (relay, retention). May import the plumbing, stores by their
Protocols, processors and schemas; never the HTTP face."""
