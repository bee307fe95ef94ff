-- memstream schema, version 27: what became of a write, readable by its event id
-- (stores/write_outcomes.py). The other outcomes are kept already, each by the event id or
-- the record id it derives: records (stored), lifecycle_events (restated, updated, proposed
-- ...), refused_writes, core block versions and diffs. A dead letter now keeps its event's
-- id too, when its value names one.
ALTER TABLE dead_letters ADD COLUMN event_id text, ADD COLUMN personal_agent text;
ALTER TABLE refused_writes ADD COLUMN personal_agent text;
-- Those kept before: the id their first bytes name, where they name one whole.
UPDATE dead_letters
   SET event_id = substring(head from '"event_id"\s*:\s*"([^"\\]{1,200})"')
 WHERE event_id IS NULL;
CREATE INDEX dead_letters_event ON dead_letters (namespace, event_id)
    WHERE event_id IS NOT NULL;
