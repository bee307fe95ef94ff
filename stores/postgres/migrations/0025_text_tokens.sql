-- memstream schema, version 25: a record's text in the model's tokens
-- (docs/retrieval.md#the-context-pack). The record sink counts it with the model's tokenizer
-- before the record is indexed (streams/stages/record_sink.py), so a pack prices what it
-- reads without counting again. NULL: not counted (a record stored before this migration,
-- or one whose text changed since); the pack counts those itself.
ALTER TABLE records ADD COLUMN text_tokens integer;
