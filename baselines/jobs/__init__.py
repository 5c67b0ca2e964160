"""The runners (Beam sweeps, the one-command Kaggle submission job), handed each collection's
`CollectionSpec` (`collections.py`). The core imports nothing from here."""
