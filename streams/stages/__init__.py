"""The stream stages: what consumes a topic and produces records and announcements, and the
timers that finish stream work. Shared here: the one parse loop (`parsing`), embedding, the
record sink and its announcements, a record's neighbours, retention and the dead-letter log;
the stages in rooms: memory/, runs/, knowledge/, consolidation/. Never the HTTP face."""
