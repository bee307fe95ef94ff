"""The documents plane: chunking a document by its headings, and the records its chunks
become when a version of it arrives."""
