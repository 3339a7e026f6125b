"""The `cronsvc` command: the only importer of click."""
