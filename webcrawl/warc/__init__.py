"""Archive-grade WARC output: records of the bytes on the wire, revisits, CDXJ indexes."""
