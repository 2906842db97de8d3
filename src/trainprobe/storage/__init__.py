"""Bytes on disk or in object storage: URLs, atomic writes, listing, and the file formats."""
