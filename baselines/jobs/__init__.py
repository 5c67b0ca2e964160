"""The runners (Beam sweeps, the one-command submission job), handed each `CollectionSpec`."""
