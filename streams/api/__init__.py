"""The HTTP face: the JSON views of the read and write API, the key views and the memory
browser (`ui/`). May import the plumbing, stores by their Protocols, processors and schemas;
never a stage: a write is published to Kafka, not applied here."""
