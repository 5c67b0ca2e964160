"""What the tile and layout generators share: the real files' featurization and an op graph."""
